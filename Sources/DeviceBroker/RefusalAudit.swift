import Foundation
import SharedDevice
import Synchronization

/// Writes the broker's refusals to the audit log without letting a caller flood it. The first refusal of
/// a kind (an app: its uid and sandbox; a method, a reason) is written at once, in full; the same refusal again within
/// `interval` is only counted, and the count is written as one event (details `repeated`: N, `window`)
/// when the interval is over (at the next refusal of that kind, or at the next `flush`). So 2,000
/// refused reads in four seconds are two events, not 2,000, and the auditor still sees how many there were.
final class RefusalAudit: Sendable {
    /// What makes two refusals the same.
    struct Kind: Hashable, Sendable {
        var uid: UInt32
        var method: String
        var reason: String
        /// The caller's app (`BrokerCaller.appKey`), so that one sandboxed app's refusals are not folded
        /// into another's of the same uid.
        var app: String? = nil
    }

    private struct Window {
        var opened: Date
        var repeated: Int
        var entry: AuditEntry
    }

    /// The most kinds tracked at once; beyond it every refusal is only counted in one overflow window.
    static let maximumKinds = 1024

    private let device: ManagedDevice
    private let interval: TimeInterval
    private let clock: @Sendable () -> Date
    private let windows = Mutex<[Kind: Window]>([:])

    init(device: ManagedDevice, interval: TimeInterval = 60, clock: @escaping @Sendable () -> Date = Date.init) {
        self.device = device
        self.interval = interval
        self.clock = clock
    }

    /// Records a refusal of `kind` described by `entry` (written now if it is the first of its window).
    func refused(_ kind: Kind, _ entry: AuditEntry) {
        let now = clock()
        let toWrite = windows.withLock { windows -> [AuditEntry] in
            var kind = kind
            if windows[kind] == nil && windows.count >= Self.maximumKinds {
                kind = Kind(uid: kind.uid, method: "*", reason: "refusals of many kinds")
            }
            if var window = windows[kind], now.timeIntervalSince(window.opened) < interval {
                window.repeated += 1
                windows[kind] = window
                return []
            }
            let closing = windows[kind].flatMap(summary)
            windows[kind] = Window(opened: now, repeated: 0, entry: entry)
            return (closing.map { [$0] } ?? []) + [entry]
        }
        write(toWrite)
    }

    /// Writes the counts of the windows that are over (all of them with `all`, at shutdown) and forgets them.
    func flush(all: Bool = false) {
        let now = clock()
        let toWrite = windows.withLock { windows -> [AuditEntry] in
            var summaries: [AuditEntry] = []
            for (kind, window) in windows where all || now.timeIntervalSince(window.opened) >= interval {
                if let summary = summary(window) { summaries.append(summary) }
                windows[kind] = nil
            }
            return summaries
        }
        write(toWrite)
    }

    /// One event for the refusals counted in `window` after its first, or nil when there were none.
    private func summary(_ window: Window) -> AuditEntry? {
        guard window.repeated > 0 else { return nil }
        var entry = window.entry
        entry.correlationID = CorrelationID.make()
        entry.details["repeated"] = "\(window.repeated)"
        entry.details["window"] = "\(Int(interval)) s from \(ISO8601DateFormatter().string(from: window.opened))"
        return entry
    }

    private func write(_ entries: [AuditEntry]) {
        for entry in entries { _ = try? device.record(entry) }
    }
}
