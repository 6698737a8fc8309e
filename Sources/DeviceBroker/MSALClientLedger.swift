import Foundation
import Synchronization

/// The MSAL client ids apps used through Microsoft's broker protocol (the MSAL bridge) since the broker
/// started, for `GetStatus`: per uid, app and client id, how many calls, how many refused, and the last call.
/// Bounded: beyond `maximumEntries` the entry whose last call is oldest goes.
final class MSALClientLedger: Sendable {
    struct Entry: Sendable {
        var uid: UInt32
        var appID: String?
        var clientID: String
        var calls: Int
        var refused: Int
        var lastCall: Date
    }

    private struct Key: Hashable {
        var uid: UInt32
        /// The policy's app: two Flatpak apps of one uid are counted apart.
        var appID: String?
        var clientID: String
    }

    static let maximumEntries = 256

    private let entries = Mutex<[Key: Entry]>([:])

    /// Counts one call of `clientID` by `uid` (the policy's app `appID`), refused unless `allowed`.
    func record(uid: UInt32, appID: String?, clientID: String, allowed: Bool, at now: Date = Date()) {
        let key = Key(uid: uid, appID: appID, clientID: clientID.lowercased())
        entries.withLock { entries in
            var entry =
                entries[key] ?? Entry(uid: uid, appID: appID, clientID: clientID, calls: 0, refused: 0, lastCall: now)
            if entries[key] == nil, entries.count >= Self.maximumEntries,
                let oldest = entries.min(by: { $0.value.lastCall < $1.value.lastCall })?.key
            {
                entries[oldest] = nil
            }
            entry.appID = appID
            entry.calls += 1
            if !allowed { entry.refused += 1 }
            entry.lastCall = now
            entries[key] = entry
        }
    }

    /// Every entry, the most recent call first.
    var entriesByLastCall: [Entry] {
        entries.withLock { Array($0.values) }.sorted { $0.lastCall > $1.lastCall }
    }
}
