public import BrokerContract
import Foundation
import SharedDevice
import Varlink

// `ReportActivity` and the idle clock in replies.
extension Broker {
    /// The kiosk shell or a launcher saw input: the worker is active. For the policy's apps and administrators.
    public func reportActivity(
        _ parameters: Broker1.ReportActivity.Parameters,
        context caller: BrokerCaller
    ) throws(BrokerFailure)
        -> Broker1.ReportActivity.Reply
    {
        if !isAdministrator(caller) { _ = try application(for: caller) }
        idle.recordActivity()
        return Broker1.ReportActivity.Reply(idle: idleState())
    }

    /// The idle clock, or nil when the policy sets no idle sign-out (or the device is private).
    func idleState() -> Broker1.IdleState? {
        idle.snapshot().map(Broker1.IdleState.init)
    }
}
