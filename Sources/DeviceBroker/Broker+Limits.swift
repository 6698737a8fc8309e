import BrokerContract
public import ProcessSandbox
import SharedDevice
import Synchronization
import Varlink

/// How many connections a caller may hold (the policy's `limits`), as `deviced` hands it to its server.
public struct BrokerConnectionShare: Sendable, Equatable {
    /// Connections the caller's uid may hold at once, over all its apps.
    public var connectionsPerUser: Int
    /// Connections the caller's app (its uid and sandbox) may hold at once; nil: no limit but the uid's.
    public var connectionsPerApp: Int?
    /// Root or a member of the policy's `administratorsGroup`: may take the slots kept for administrators.
    public var administrator: Bool
    /// Slots that only administrators may take.
    public var administratorConnections: Int
}

// What one app, or a local user the policy does not list, may take of the broker.
extension Broker {
    /// The policy's limits (the defaults on a device that is not provisioned or whose store fails now).
    var limits: DevicePolicy.Limits {
        (try? currentPolicy())?.policy?.limits ?? .defaults
    }

    /// The connections the kernel's `uid`/`gid` may hold: an administrator any number (and the kept
    /// slots), an app of the policy `limits.connectionsPerApp`, anyone else `limits.connectionsPerOtherUser`.
    ///
    /// An app's uid may hold `limits.connectionsPerApp` for each app the policy lists for it (its host app and
    /// its Flatpak apps), and each of those apps (its uid and sandbox) `limits.connectionsPerApp`; a sandbox
    /// the policy does not list `limits.connectionsPerOtherUser`, within its uid's total.
    public func connectionShare(
        uid: UInt32,
        gid: UInt32,
        pid: Int32,
        sandbox: PeerSandbox = .host
    ) -> BrokerConnectionShare {
        let limits = self.limits
        let caller = BrokerCaller(uid: uid, gid: gid, pid: pid, sandbox: sandbox, connectionID: 0)
        if isAdministrator(caller) {
            return BrokerConnectionShare(
                connectionsPerUser: .max,
                connectionsPerApp: nil,
                administrator: true,
                administratorConnections: limits.administratorConnections
            )
        }
        let policy = (try? currentPolicy())?.policy
        let apps = policy?.appCount(uid: uid) ?? 0
        let isApp = policy?.app(uid: uid, sandbox: sandbox) != nil
        return BrokerConnectionShare(
            connectionsPerUser: apps > 0 ? limits.connectionsPerApp * apps : limits.connectionsPerOtherUser,
            connectionsPerApp: isApp ? limits.connectionsPerApp : limits.connectionsPerOtherUser,
            administrator: false,
            administratorConnections: limits.administratorConnections
        )
    }

    /// A uid's total of a per-app limit: `perApp` for each app the policy lists for it (at least one), however
    /// many sandboxes it starts.
    func uidShare(of perApp: Int, uid: UInt32) -> Int {
        perApp * max(1, (try? currentPolicy())?.policy?.appCount(uid: uid) ?? 1)
    }

    /// Runs an interactive sign-in (`body`) in one of the caller's `limits.pendingSignInsPerApp` slots, so
    /// that one app cannot make the broker poll the identity provider for hundreds of pending sign-ins.
    /// - Throws: `LimitExceeded` (limit `pendingSignInsPerApp`) when every slot of the caller is taken.
    func inSignInSlot<T>(
        _ caller: BrokerCaller,
        _ body: () async throws(BrokerFailure) -> T
    ) async throws(BrokerFailure) -> T {
        let maximum = limits.pendingSignInsPerApp
        // The uid's total: its share for each app the policy lists for it, however many sandboxes it starts.
        let total = uidShare(of: maximum, uid: caller.uid)
        let refusal = pendingSignIns.withLock { pending -> String? in
            if pending.count(of: caller.appKey) >= maximum {
                return
                    "\(caller.actor) already has \(maximum) sign-ins pending (the policy's limits.pendingSignInsPerApp); finish or cancel one first"
            }
            if pending.count(ofUID: caller.uid) >= total {
                return
                    "uid \(caller.uid) already has \(total) sign-ins pending over its apps (limits.pendingSignInsPerApp for each app the policy lists for it); finish or cancel one first"
            }
            pending.add(caller.appKey, uid: caller.uid)
            return nil
        }
        if let refusal { throw .limitExceeded(.pendingSignInsPerApp, maximum: maximum, refusal) }
        defer { pendingSignIns.withLock { $0.remove(caller.appKey, uid: caller.uid) } }
        return try await body()
    }

    /// The default of `browserSignInsInTotal`: 16 browser sign-ins pending over every app (with
    /// `limits.pendingSignInsPerApp` at its default of 2, eight apps' worth), so that their listener threads
    /// stay well under the unit's `TasksMax=`.
    public static let defaultBrowserSignInsInTotal = 16

    /// Runs a browser sign-in (`body`) in one of the server's `browserSignInsInTotal` slots: each holds a
    /// loopback listener's thread for as long as the browser takes. An app with no browser sign-in pending
    /// is never refused (its own share: one, beyond the total), nor is root or an administrator; an app
    /// that has one already is refused once the total is reached.
    /// - Throws: `LimitExceeded` (limit `pendingBrowserSignIns`).
    func inBrowserSignInSlot(
        _ caller: BrokerCaller,
        _ body: () async throws(BrokerFailure) -> Void
    ) async throws(BrokerFailure) {
        let maximum = browserSignInsInTotal
        let administrator = isAdministrator(caller)
        let taken = pendingBrowserSignIns.withLock { pending -> Bool in
            let total = pending.values.reduce(0, +)
            let own = pending[caller.uid, default: 0]
            guard administrator || total < maximum || own == 0 else { return false }
            pending[caller.uid] = own + 1
            return true
        }
        guard taken else {
            throw .limitExceeded(
                .pendingBrowserSignIns,
                maximum: maximum,
                """
                \(maximum) browser sign-ins are pending on this device, and uid \(caller.uid) has one already                 (the broker's bound on pending browser sign-ins over every app); finish or cancel it first, or retry later
                """
            )
        }
        defer {
            pendingBrowserSignIns.withLock { pending in
                let left = pending[caller.uid, default: 1] - 1
                pending[caller.uid] = left > 0 ? left : nil
            }
        }
        try await body()
    }

    /// Writes the counts of refusals coalesced in the audit log whose window is over (all of them with
    /// `all`, when the daemon stops). The daemon calls this once a minute.
    public func flushRefusalAudit(all: Bool = false) {
        refusals.flush(all: all)
    }
}

/// Interactive sign-ins pending, per app (`BrokerCaller.appKey`) and per uid (the total over its apps).
struct PendingCounts: Sendable {
    private var byApp: [String: Int] = [:]
    private var byUID: [UInt32: Int] = [:]

    /// The pending sign-ins of the app `appKey`.
    func count(of appKey: String) -> Int { byApp[appKey, default: 0] }

    /// The pending sign-ins of every app of `uid`.
    func count(ofUID uid: UInt32) -> Int { byUID[uid, default: 0] }

    /// One more of the app `appKey` of `uid`.
    mutating func add(_ appKey: String, uid: UInt32) {
        byApp[appKey, default: 0] += 1
        byUID[uid, default: 0] += 1
    }

    /// One fewer of the app `appKey` of `uid`.
    mutating func remove(_ appKey: String, uid: UInt32) {
        let app = byApp[appKey, default: 1] - 1
        byApp[appKey] = app > 0 ? app : nil
        let all = byUID[uid, default: 1] - 1
        byUID[uid] = all > 0 ? all : nil
    }
}
