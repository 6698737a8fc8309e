import DeviceBroker
import ServiceLifecycle

/// Keeps the disk reserve for sign-outs on a full disk in place beside the server until the daemon stops:
/// made again within `Broker.diskReserveCheckInterval` of there being room. Its file work runs on
/// `executor` (the store's threads), never on an event loop.
struct DiskReserveKeeper: Service {
    let broker: Broker
    let executor: any TaskExecutor

    func run() async throws {
        await withTaskExecutorPreference(executor) {
            await cancelWhenGracefulShutdown {
                await broker.runDiskReserveKeeper()
            }
        }
    }
}
