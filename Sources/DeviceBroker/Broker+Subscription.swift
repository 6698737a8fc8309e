import Foundation
import SharedDevice
import Varlink

// Account changes pushed to every subscribed app (MSAL Android's CURRENT_ACCOUNT_CHANGED broadcast).
extension Broker {
    /// Streams an `AccountEvent` for every account change until the caller goes away; the first reply
    /// (`subscribed`) says the subscription is live and gives the current account.
    func subscribe(caller: BrokerCaller, reply: @escaping @Sendable (VarlinkReply) async -> Bool) async throws(BrokerFailure) {
        let application = try application(for: caller)
        // Subscribe before reading the state, so no change falls in between.
        let changes = events.subscribe()
        let sequence = (try? device.lastAuditSequence()) ?? 0
        guard await reply(try event(kind: "subscribed", reason: nil, sequence: sequence, application: application)) else { return }
        for await change in changes {
            let kind = switch change.kind {
            case .signedIn: "signedIn"
            case .signedOutGlobally: "signedOut"
            case .switched: "switched"
            case .deviceModeChanged: "deviceModeChanged"
            }
            guard await reply(try event(kind: kind, reason: change.reason?.rawValue, sequence: change.sequence, application: application)) else {
                return
            }
        }
    }

    private func event(kind: String, reason: String?, sequence: Int64, application: PublicClientApplication) throws(BrokerFailure) -> VarlinkReply {
        let current: DeviceAccount?
        do {
            current = try application.currentAccount().current
        } catch {
            throw BrokerFailure(error)
        }
        return VarlinkReply(parameters: ["event": .object([
            "kind": .string(kind), "current": .account(current), "reason": .optional(reason),
            "mode": .string(device.information().information.mode.rawValue), "sequence": .int(sequence),
        ])], continues: true)
    }
}
