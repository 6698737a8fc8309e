import Foundation
import SharedDevice
import Varlink

// `ReportActivity` and the idle clock in replies.
extension Broker {
    /// The kiosk shell or a launcher saw input: the worker is active. For the policy's apps and administrators.
    func reportActivity(_ caller: BrokerCaller) throws(BrokerFailure) -> VarlinkReply {
        if !isAdministrator(caller) { _ = try application(for: caller) }
        idle.recordActivity()
        return VarlinkReply(parameters: ["idle": idleValue()])
    }

    /// The idle clock as an `IdleState`, or null when the policy sets no idle sign-out (or the device is private).
    func idleValue() -> VarlinkValue {
        guard let snapshot = idle.snapshot() else { return .null }
        return .object([
            "idleSignOutSeconds": .int(Int64(snapshot.idleSignOutSeconds)), "warningSeconds": .int(Int64(snapshot.warningSeconds)),
            "idleSeconds": snapshot.idleSeconds.map(VarlinkValue.double) ?? .null,
            "signOutIn": snapshot.signOutIn.map(VarlinkValue.double) ?? .null,
            "warning": .bool(snapshot.warning),
        ])
    }
}
