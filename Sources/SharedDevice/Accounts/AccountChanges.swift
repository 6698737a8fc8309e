import Foundation

extension AccountManager {
    /// Account changes made by any process on this device, from now on: sign-ins, global sign-outs,
    /// shift switches and forced mode changes (MSAL Android's `CURRENT_ACCOUNT_CHANGED` broadcast).
    ///
    /// A background thread sleeps on an inotify watch of the state directory's signal file (rung after
    /// every committed change) and then reads the new account events from the audit log; it re-checks
    /// every `fallbackInterval` in case a signal was lost. It stops when the consumer stops iterating.
    /// On receiving an event, call `currentAccount(for:)` again, as MSAL advises.
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
        continuation.onTermination = { _ in watcher.cancel() }
        let device = self.device
        Thread.detachNewThread {
            var last = start
            while !watcher.isCancelled {
                _ = watcher.wait(timeout: fallbackInterval)
                if watcher.isCancelled { break }
                guard let events = try? device.auditEvents(matching: AuditFilter(types: Self.changeTypes, afterSequence: last)) else { continue }
                for event in events {
                    last = max(last, event.sequence)
                    if let change = Self.change(from: event) { continuation.yield(change) }
                }
            }
            continuation.finish()
        }
        return stream
    }

    private static let changeTypes: Set<AuditEventType> = [.accountSignedIn, .accountSignedOut, .accountSwitched, .deviceModeChanged]

    private static func change(from event: AuditEvent) -> AccountChange? {
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
        return AccountChange(kind: kind, account: event.account, sequence: event.sequence,
                             reason: kind == .signedOutGlobally ? event.reason.flatMap(SignOutReason.init(rawValue:)) : nil)
    }
}
