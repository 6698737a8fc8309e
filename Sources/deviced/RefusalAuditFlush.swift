import DeviceBroker
import ServiceLifecycle

/// Writes the coalesced refusal counts to the audit log once a minute, and all of them when the daemon
/// stops; the writes run on `executor` (the store's threads).
struct RefusalAuditFlush: Service {
    let broker: Broker
    let executor: any TaskExecutor

    func run() async throws {
        await withTaskExecutorPreference(executor) {
            await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(60))
                    broker.flushRefusalAudit()
                }
            }
            broker.flushRefusalAudit(all: true)
        }
    }
}
