import BrokerContract
import SharedDevice
import Synchronization
import Varlink

/// How many connections a caller may hold (the policy's `limits`), as `deviced` hands it to its server.
public struct BrokerConnectionShare: Sendable, Equatable {
    /// Connections the caller's uid may hold at once.
    public var connectionsPerUser: Int
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
    public func connectionShare(uid: UInt32, gid: UInt32, pid: Int32) -> BrokerConnectionShare {
        let limits = self.limits
        let caller = BrokerCaller(uid: uid, gid: gid, pid: pid, connectionID: 0)
        if isAdministrator(caller) {
            return BrokerConnectionShare(
                connectionsPerUser: .max,
                administrator: true,
                administratorConnections: limits.administratorConnections
            )
        }
        let isApp = (try? currentPolicy())?.policy?.app(uid: uid) != nil
        return BrokerConnectionShare(
            connectionsPerUser: isApp ? limits.connectionsPerApp : limits.connectionsPerOtherUser,
            administrator: false,
            administratorConnections: limits.administratorConnections
        )
    }

    /// Runs an interactive sign-in (`body`) in one of the caller's `limits.pendingSignInsPerApp` slots, so
    /// that one app cannot make the broker poll the identity provider for hundreds of pending sign-ins.
    /// - Throws: `LimitExceeded` (limit `pendingSignInsPerApp`) when every slot of the caller is taken.
    func inSignInSlot<T>(
        _ caller: BrokerCaller,
        _ body: () async throws(BrokerFailure) -> T
    ) async throws(BrokerFailure) -> T {
        let maximum = limits.pendingSignInsPerApp
        let taken = pendingSignIns.withLock { pending -> Bool in
            guard pending[caller.uid, default: 0] < maximum else { return false }
            pending[caller.uid, default: 0] += 1
            return true
        }
        guard taken else {
            throw .limitExceeded(
                .pendingSignInsPerApp,
                maximum: maximum,
                "uid \(caller.uid) already has \(maximum) sign-ins pending (the policy's limits.pendingSignInsPerApp); finish or cancel one first"
            )
        }
        defer {
            pendingSignIns.withLock { pending in
                let left = pending[caller.uid, default: 1] - 1
                pending[caller.uid] = left > 0 ? left : nil
            }
        }
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
