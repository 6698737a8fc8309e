import DeviceBroker
import ServiceLifecycle

/// The policy's idle sign-out, beside the server until the daemon stops (the monitor then persists the
/// worker's last activity).
struct IdleSignOut: Service {
    let broker: Broker

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await broker.runIdleMonitor()
        }
    }
}
