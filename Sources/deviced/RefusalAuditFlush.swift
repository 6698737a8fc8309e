import DeviceBroker
import ServiceLifecycle

/// Writes the coalesced refusal counts to the audit log once a minute, and all of them when the daemon stops.
struct RefusalAuditFlush: Service {
    let broker: Broker

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(60))
                broker.flushRefusalAudit()
            }
        }
        broker.flushRefusalAudit(all: true)
    }
}
