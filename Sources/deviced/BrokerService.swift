import Logging
import ServiceLifecycle
import VarlinkServer

/// The daemon's one service: listen, tell systemd it is ready, serve until SIGTERM, then let the server
/// finish the calls in progress and stop.
struct BrokerService: Service {
    let server: VarlinkServer
    let listener: VarlinkServer.Listener
    let notifier: SystemdNotifier
    let logger: Logger

    func run() async throws {
        try await server.start(listener)
        notifier.notify("READY=1\nSTATUS=serving")
        logger.info("deviced ready", metadata: ["deviced.listener": "\(listener)"])
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
