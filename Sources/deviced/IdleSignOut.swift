import DeviceBroker
import ServiceLifecycle

/// The policy's idle sign-out, beside the server until the daemon stops (the monitor then persists the
/// worker's last activity). Its store work runs on `executor` (the store's threads).
struct IdleSignOut: Service {
    let broker: Broker
    let executor: any TaskExecutor

    func run() async throws {
        await withTaskExecutorPreference(executor) {
            await cancelWhenGracefulShutdown {
                await broker.runIdleMonitor()
            }
        }
    }
}
