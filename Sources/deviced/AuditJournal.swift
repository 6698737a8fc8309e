import Foundation
import Logging
import PathSafety
import ServiceLifecycle
import SharedDevice

/// Copies every audit event to the systemd journal as a structured entry (`journalctl
/// SHAREDMODE_AUDIT_TYPE=account.signed_out`; `systemd-journal-upload` ships the fields unchanged), or,
/// when no journal runs, to the daemon's log at info. An audit event holds no secret: sequence, type,
/// actor, account, reason, correlation id, details, and the device's id. Every `interval` it reads the
/// events after the last one it copied (one indexed query). The last one copied is kept in `cursorFile`,
/// so events appended while no daemon ran (provisioning, a key rotation with deviced stopped) are copied
/// at the next start, and none twice; without the file (the first start) the whole log is copied. The
/// queries run on `executor` (the store's threads), never on the cooperative pool.
struct AuditJournal: Service {
    let device: ManagedDevice
    let executor: any TaskExecutor
    let logger: Logger
    /// The state directory, where the sequence of the last event copied is kept (`cursorFileName`).
    let stateDirectory: URL
    /// journald's native socket, when the journal runs.
    var journal: JournalSink? = JournalSink()
    var interval: Duration = .milliseconds(250)

    /// The cursor's file name in the state directory.
    static let cursorFileName = "audit-journal.cursor"

    /// The journal's MESSAGE_ID of an audit event (one id for every type: the type is a field of its own).
    static let messageID = "9c2f4e7a1b3d4f6a8e0c2b4d6f8a1c3e"

    func run() async {
        await withTaskExecutorPreference(executor) {
            // The state directory is reached safely once, and held for every write of the cursor.
            await copyEvents(cursorDirectory: try? Self.directory(stateDirectory))
        }
    }

    private func copyEvents(cursorDirectory: SafeDirectory?) async {
        await cancelWhenGracefulShutdown {
            var last = startingSequence(cursorDirectory)
            var first = true
            while !Task.isCancelled {
                // The events left from before the start at once; then every interval. Cancelled at a graceful
                // shutdown: a normal end, not a failure of the daemon.
                if !first { do { try await Task.sleep(for: interval) } catch { return } }
                first = false
                guard let events = try? device.auditEvents(matching: AuditFilter(afterSequence: last)), !events.isEmpty
                else { continue }
                let deviceID = device.information().information.deviceID
                for event in events {
                    last = max(last, event.sequence)
                    if let journal, journal.send(Self.fields(of: event, deviceID: deviceID)) { continue }
                    logger.info("audit event", metadata: Self.metadata(of: event))
                }
                keepCursor(last, in: cursorDirectory)
            }
        }
    }

    /// The sequence after which to copy: the cursor's, unless the log no longer reaches it (the state
    /// directory was restored or the log replaced: then everything), 0 without a cursor.
    private func startingSequence(_ directory: SafeDirectory?) -> Int64 {
        guard let bytes = try? directory?.contents(of: Self.cursorFileName, limit: 64),
            let cursor = Int64(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)),
            cursor >= 0
        else { return 0 }
        let newest = (try? device.lastAuditSequence()) ?? 0
        return cursor <= newest ? cursor : 0
    }

    /// Records `sequence` as the last event copied (a new file renamed over the old one, in the state
    /// directory held by descriptor: never written through a symbolic link).
    private func keepCursor(_ sequence: Int64, in held: SafeDirectory?) {
        do {
            let directory = try held ?? Self.directory(stateDirectory)
            try directory.replace(Self.cursorFileName, with: Array("\(sequence)\n".utf8))
        } catch {
            logger.warning(
                "deviced: cannot keep the audit journal's cursor; events may be copied again after a restart",
                metadata: [
                    "path": "\(stateDirectory.appendingPathComponent(Self.cursorFileName).path)", "error": "\(error)",
                ]
            )
        }
    }

    /// The state directory, reached safely (`SafeDirectory.open`).
    private static func directory(_ url: URL) throws -> SafeDirectory {
        try SafeDirectory.open(url.path, purpose: "the state directory", alternative: "choose another with --state-dir")
    }

    /// The journal entry of `event`: `MESSAGE` for people, `SHAREDMODE_*` fields for queries.
    static func fields(of event: AuditEvent, deviceID: String?) -> [(name: String, value: String)] {
        var message = "audit #\(event.sequence) \(event.type) by \(event.actor)"
        if let account = event.account { message += " account \(account)" }
        if let reason = event.reason { message += " (\(reason))" }
        var fields: [(name: String, value: String)] = [
            ("MESSAGE", message), ("MESSAGE_ID", messageID), ("PRIORITY", "\(priority(of: event.type))"),
            ("SYSLOG_IDENTIFIER", "deviced"),
            ("SHAREDMODE_AUDIT_SEQUENCE", "\(event.sequence)"), ("SHAREDMODE_AUDIT_TYPE", event.type.rawValue),
            ("SHAREDMODE_AUDIT_ACTOR", event.actor), ("SHAREDMODE_AUDIT_CORRELATION_ID", event.correlationID),
            ("SHAREDMODE_AUDIT_TIME", event.recordedTime),
        ]
        if let account = event.account { fields.append(("SHAREDMODE_AUDIT_ACCOUNT", account)) }
        if let reason = event.reason { fields.append(("SHAREDMODE_AUDIT_REASON", reason)) }
        if !event.details.isEmpty,
            let details = try? JSONSerialization.data(withJSONObject: event.details, options: [.sortedKeys])
        {
            fields.append(("SHAREDMODE_AUDIT_DETAILS", String(decoding: details, as: UTF8.self)))
        }
        if let deviceID { fields.append(("SHAREDMODE_DEVICE_ID", deviceID)) }
        return fields
    }

    /// syslog priority: refusals are warnings (4), sign-outs, switches and device changes notices (5),
    /// the rest information (6).
    static func priority(of type: AuditEventType) -> Int {
        let name = type.rawValue
        if name.hasSuffix("access_denied") || name.hasSuffix("sign_in_failed") { return 4 }
        if name.hasPrefix("device.") || name == "account.signed_out" || name == "account.switched" { return 5 }
        return 6
    }

    private static func metadata(of event: AuditEvent) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            "audit.sequence": "\(event.sequence)", "audit.type": "\(event.type)", "audit.actor": "\(event.actor)",
            "audit.correlation_id": "\(event.correlationID)",
        ]
        if let account = event.account { metadata["audit.account"] = "\(account)" }
        if let reason = event.reason { metadata["audit.reason"] = "\(reason)" }
        return metadata
    }
}
