import Foundation
import IdentityClient
import SharedDevice
import Synchronization

/// Login-screen sign-ins waiting for the worker's password, code or device-code approval, for at most
/// `lifetime` each and `maximum` in all (the login screen is root's: there is no app to count them per).
/// Ids are random (a v4 UUID); only administrators reach them.
final class LoginScreenSignIns: Sendable {
    /// What the sign-in takes next.
    enum Proof: Sendable {
        /// The password grant: the worker's password.
        case password
        /// Native authentication, at this step (its challenge says password or code).
        case nativeAuth(NativeSignInStep)
        /// The device code: AwaitLoginScreenDeviceCode runs it.
        case deviceCode
    }

    struct Entry: Sendable {
        /// The name typed at the prompt.
        var username: String
        /// The policy app it signs in for.
        var appID: String
        var scopes: [String]
        var place: LoginScreenPlace
        var proof: Proof
        var expires: Date
        /// A device-code wait runs for it (a second one is refused).
        var awaiting = false
    }

    /// How long a sign-in waits for the worker.
    static let lifetime: TimeInterval = 600
    /// The most sign-ins open at once.
    static let maximum = 8

    private let entries = Mutex<[String: Entry]>([:])
    private let clock: @Sendable () -> Date

    init(clock: @escaping @Sendable () -> Date) {
        self.clock = clock
    }

    /// When a sign-in opened now expires.
    var expiry: Date { clock().addingTimeInterval(Self.lifetime) }

    /// Keeps `entry` unless `maximum` are open; returns its id, or nil when full.
    func open(_ entry: Entry) -> String? {
        let now = clock()
        return entries.withLock { entries -> String? in
            entries = entries.filter { $0.value.expires > now }
            guard entries.count < Self.maximum else { return nil }
            let id = UUID().uuidString.lowercased()
            entries[id] = entry
            return id
        }
    }

    /// The open sign-in `id`, or nil (unknown, finished or expired).
    func entry(_ id: String) -> Entry? {
        let now = clock()
        return entries.withLock { entries in
            guard let entry = entries[id] else { return nil }
            guard entry.expires > now else {
                entries[id] = nil
                return nil
            }
            return entry
        }
    }

    /// Marks the device-code sign-in `id` as awaited; nil when it is not open or already awaited.
    func beginAwaiting(_ id: String) -> Entry? {
        let now = clock()
        return entries.withLock { entries in
            guard var entry = entries[id], entry.expires > now, !entry.awaiting else { return nil }
            entry.awaiting = true
            entries[id] = entry
            return entry
        }
    }

    /// The sign-in is over.
    func close(_ id: String) {
        entries.withLock { $0[id] = nil }
    }

    /// How many are open now.
    var openCount: Int {
        let now = clock()
        return entries.withLock { $0.values.filter { $0.expires > now }.count }
    }
}
