import Logging
import ServiceLifecycle
import VarlinkServer

/// The daemon's one service: the server (which tells systemd it is ready once it listens), serving until
/// SIGTERM; then systemd is told the daemon stops while the server finishes the calls in progress.
struct BrokerService: Service {
    let server: VarlinkServer
    let notifier: SystemdNotifier
    let logger: Logger

    func run() async throws {
        try await withGracefulShutdownHandler {
            // The server quiesces on the same graceful shutdown: it stops accepting, waits for the calls in
            // progress (up to its grace period) and closes every connection before it returns.
            try await server.run()
        } onGracefulShutdown: { [notifier, logger] in
            notifier.notify("STOPPING=1")
            logger.info("deviced stopping: finishing the calls in progress")
        }
    }
}
