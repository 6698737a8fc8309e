import Foundation
import IdentityClient
import SharedDevice
import Synchronization

/// Native sign-ins waiting for the worker's password or code, each bound to the uid that started it and
/// its app's MSAL client id, for at most `lifetime`. Bounded per uid by the caller (`limits.pendingSignInsPerApp`).
final class NativeSignIns: Sendable {
    struct Entry: Sendable {
        var uid: UInt32
        var step: NativeSignInStep
        var msalClientID: String?
        var expires: Date
        /// The shift change the sign-in completes (`StartNativeSignIn` with a `switchReason`).
        var shift: AccountManager.ShiftSwitch?
    }

    /// How long a sign-in waits for the worker.
    static let lifetime: TimeInterval = 600

    private let entries = Mutex<[String: Entry]>([:])
    private let clock: @Sendable () -> Date

    init(clock: @escaping @Sendable () -> Date = Date.init) {
        self.clock = clock
    }

    /// Keeps `step` for `uid` unless it already has `maximum` open; returns its id, or nil when full.
    func open(
        _ step: NativeSignInStep,
        uid: UInt32,
        msalClientID: String?,
        shift: AccountManager.ShiftSwitch? = nil,
        maximum: Int
    ) -> String? {
        let now = clock()
        return entries.withLock { entries -> String? in
            entries = entries.filter { $0.value.expires > now }
            guard entries.values.filter({ $0.uid == uid }).count < maximum else { return nil }
            let id = UUID().uuidString.lowercased()
            entries[id] = Entry(
                uid: uid,
                step: step,
                msalClientID: msalClientID,
                expires: now.addingTimeInterval(Self.lifetime),
                shift: shift
            )
            return id
        }
    }

    /// How many unexpired sign-ins `uid` has open.
    func openCount(uid: UInt32) -> Int {
        let now = clock()
        return entries.withLock { entries in entries.values.filter { $0.uid == uid && $0.expires > now }.count }
    }

    /// The open sign-in `id` of `uid`, or nil (unknown, another uid's, or expired).
    func entry(_ id: String, uid: UInt32) -> Entry? {
        let now = clock()
        return entries.withLock { entries in
            guard let entry = entries[id], entry.uid == uid else { return nil }
            guard entry.expires > now else {
                entries[id] = nil
                return nil
            }
            return entry
        }
    }

    /// The sign-in moved on to `step` (a resent code).
    func update(_ id: String, step: NativeSignInStep) {
        entries.withLock { $0[id]?.step = step }
    }

    /// The sign-in is over.
    func close(_ id: String) {
        entries.withLock { $0[id] = nil }
    }
}
