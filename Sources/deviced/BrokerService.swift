import Logging
import ServiceLifecycle
import VarlinkServer

/// The daemon's one service: listen, tell systemd it is ready, serve until SIGTERM, then finish the calls
/// in progress and stop.
struct BrokerService: Service {
    let server: VarlinkServer
    let listener: VarlinkServer.Listener
    let notifier: SystemdNotifier
    let logger: Logger

    func run() async throws {
        try await server.start(listener)
        notifier.notify("READY=1\nSTATUS=serving")
        logger.info("deviced ready", metadata: ["deviced.listener": "\(listener)"])
        try? await gracefulShutdown()
        notifier.notify("STOPPING=1")
        logger.info("deviced stopping: finishing the calls in progress")
        await server.shutdown()
    }
}
