import Foundation
import Synchronization

extension AccountManager {
    /// Account changes made by any process on this device, from now on: sign-ins, global sign-outs,
    /// shift switches and forced mode changes (MSAL Android's `CURRENT_ACCOUNT_CHANGED` broadcast), in
    /// audit sequence order, each once.
    ///
    /// This process's own changes (through this manager's `device`) are handed over as soon as they commit.
    /// Other processes' come through the change signal: a background thread sleeps on an inotify watch of
    /// the state directory's signal file (rung after every committed change) and then reads the new account
    /// events from the audit log; it re-checks every `fallbackInterval` in case a signal was lost. The
    /// signal of an own change, arriving later, finds nothing new. It stops when the consumer stops
    /// iterating. On receiving an event, call `currentAccount(for:)` again, as MSAL advises.
    public func changes(fallbackInterval: Duration = .seconds(5)) -> AsyncStream<AccountChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: AccountChange.self, bufferingPolicy: .unbounded)
        let watcher: ChangeSignal.Watcher
        let start: Int64
        do {
            watcher = try signal.watch()  // before reading the log, so nothing falls in between
            start = try device.lastAuditSequence()
        } catch {
            continuation.finish()
            return stream
        }
        let cursor = ChangeCursor(after: start, continuation)
        let device = self.device
        // Own events committed between the read above and this are missed here, and found by the watcher.
        let listener = device.committedAuditEvents.listen { event in cursor.committed(event) }
        continuation.onTermination = { _ in
            device.committedAuditEvents.stopListening(listener)
            watcher.cancel()
        }
        Thread.detachNewThread {
            while !watcher.isCancelled {
                _ = watcher.wait(timeout: fallbackInterval)
                if watcher.isCancelled { break }
                guard
                    let page = try? device.auditPage(
                        matching: AuditFilter(types: Self.changeTypes, afterSequence: cursor.seen)
                    )
                else {
                    continue
                }
                cursor.read(page.events, through: page.lastSequence)
            }
            continuation.finish()
        }
        return stream
    }

    /// Where a change stream is in the audit log, shared by its two sources (this process's commits and the
    /// watcher's reads): every account change up to `seen` has been yielded, each once and in order.
    private final class ChangeCursor: Sendable {
        private let state: Mutex<Int64>
        private let continuation: AsyncStream<AccountChange>.Continuation

        init(after start: Int64, _ continuation: AsyncStream<AccountChange>.Continuation) {
            state = Mutex(start)
            self.continuation = continuation
        }

        var seen: Int64 { state.withLock { $0 } }

        /// An event this process just committed: yielded when it is the next in the log. After a gap (an
        /// event of another process not read yet) it is left to the watcher, which reads both in order.
        func committed(_ event: AuditEvent) {
            state.withLock { seen in
                guard event.sequence == seen + 1 else { return }
                seen = event.sequence
                if let change = AccountManager.change(from: event) { continuation.yield(change) }
            }
        }

        /// The watcher's read: the account events after `seen` and the log's newest sequence number then,
        /// from one snapshot. Those this process's commits already yielded are skipped.
        func read(_ events: [AuditEvent], through lastSequence: Int64) {
            state.withLock { seen in
                for event in events where event.sequence > seen {
                    if let change = AccountManager.change(from: event) { continuation.yield(change) }
                }
                seen = max(seen, lastSequence)
            }
        }
    }

    private static let changeTypes: Set<AuditEventType> = [
        .accountSignedIn, .accountSignedOut, .accountSwitched, .deviceModeChanged,
    ]

    fileprivate static func change(from event: AuditEvent) -> AccountChange? {
        let kind: AccountChange.Kind
        switch event.type {
        case .accountSignedIn: kind = .signedIn
        case .accountSignedOut:
            guard event.details["scope"] == "global" else { return nil }
            kind = .signedOutGlobally
        case .accountSwitched: kind = .switched
        case .deviceModeChanged: kind = .deviceModeChanged
        default: return nil
        }
        return AccountChange(
            kind: kind,
            account: event.account,
            sequence: event.sequence,
            reason: kind == .signedOutGlobally ? event.reason.flatMap(SignOutReason.init(rawValue:)) : nil,
            correlationID: event.correlationID
        )
    }
}
