import Logging
import ServiceLifecycle
import SharedDevice

/// Copies every new audit event to the daemon's log at info (sequence number, type, actor, account,
/// reason, correlation id; an audit event holds no secret), so a journal or any shipper reading the
/// daemon's standard error gets the shift's events without a server of ours. Every `interval` it reads the
/// events after the last one it logged (one indexed query), starting after those already there. The
/// queries run on `executor` (the store's threads), never on the cooperative pool.
struct AuditJournal: Service {
    let device: ManagedDevice
    let executor: any TaskExecutor
    let logger: Logger
    var interval: Duration = .milliseconds(250)

    func run() async {
        await withTaskExecutorPreference(executor) {
            await journal()
        }
    }

    private func journal() async {
        await cancelWhenGracefulShutdown {
            var last = (try? device.lastAuditSequence()) ?? 0
            while !Task.isCancelled {
                // Cancelled at a graceful shutdown: a normal end, not a failure of the daemon.
                do { try await Task.sleep(for: interval) } catch { return }
                guard let events = try? device.auditEvents(matching: AuditFilter(afterSequence: last)) else { continue }
                for event in events {
                    last = max(last, event.sequence)
                    var metadata: Logger.Metadata = [
                        "audit.sequence": "\(event.sequence)", "audit.type": "\(event.type)", "audit.actor": "\(event.actor)",
                        "audit.correlation_id": "\(event.correlationID)",
                    ]
                    if let account = event.account { metadata["audit.account"] = "\(account)" }
                    if let reason = event.reason { metadata["audit.reason"] = "\(reason)" }
                    logger.info("audit event", metadata: metadata)
                }
            }
        }
    }
}
