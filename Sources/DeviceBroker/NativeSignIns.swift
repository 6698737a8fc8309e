import Foundation
import IdentityClient
import SharedDevice
import Synchronization

/// Native sign-ins waiting for the worker's password or code, each bound to the app that started it (its
/// uid and sandbox: `BrokerCaller.appKey`) and its MSAL client id, for at most `lifetime`. Bounded per app
/// and per uid by the caller (`limits.pendingSignInsPerApp`).
final class NativeSignIns: Sendable {
    struct Entry: Sendable {
        /// The app that started it (`BrokerCaller.appKey`): only that app may continue it.
        var owner: String
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

    /// Keeps `step` for the app `owner` of `uid` unless the app already has `maximum` open, or its uid
    /// `uidMaximum` over all its apps; returns its id, or nil when full.
    func open(
        _ step: NativeSignInStep,
        owner: String,
        uid: UInt32,
        msalClientID: String?,
        shift: AccountManager.ShiftSwitch? = nil,
        maximum: Int,
        uidMaximum: Int
    ) -> String? {
        let now = clock()
        return entries.withLock { entries -> String? in
            entries = entries.filter { $0.value.expires > now }
            guard entries.values.count(where: { $0.owner == owner }) < maximum,
                entries.values.count(where: { $0.uid == uid }) < uidMaximum
            else { return nil }
            let id = UUID().uuidString.lowercased()
            entries[id] = Entry(
                owner: owner,
                uid: uid,
                step: step,
                msalClientID: msalClientID,
                expires: now.addingTimeInterval(Self.lifetime),
                shift: shift
            )
            return id
        }
    }

    /// How many unexpired sign-ins the app `owner` has open, and its uid over all its apps.
    func openCount(owner: String, uid: UInt32) -> (app: Int, uid: Int) {
        let now = clock()
        return entries.withLock { entries in
            let open = entries.values.filter { $0.expires > now }
            return (open.count { $0.owner == owner }, open.count { $0.uid == uid })
        }
    }

    /// The open sign-in `id` of the app `owner`, or nil (unknown, another app's, or expired).
    func entry(_ id: String, owner: String) -> Entry? {
        let now = clock()
        return entries.withLock { entries in
            guard let entry = entries[id], entry.owner == owner else { return nil }
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
