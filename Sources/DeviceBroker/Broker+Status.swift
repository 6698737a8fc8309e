import Foundation
import KeychainStore
import SharedDevice
import Varlink

// `GetStatus`: the broker's state for an administrator (`devicectl status`).
extension Broker {
    func status(_ caller: BrokerCaller) throws(BrokerFailure) -> VarlinkReply {
        guard isAdministrator(caller) else { throw BrokerFailure(reply: .permissionDenied) }
        let (record, policy) = try currentPolicy()
        let statuses: [AccountStatus]
        let lastSequence: Int64
        do {
            statuses = try AccountManager(device: device, logger: logger).accounts()
            lastSequence = try device.lastAuditSequence()
        } catch {
            throw BrokerFailure(error)
        }
        let current = statuses.first { $0.signedIn }
        let connections: [VarlinkValue] = connectedCallers.map { connected in
            .object([
                "uid": .int(Int64(connected.uid)), "pid": .int(Int64(connected.pid)),
                "appId": .optional(policy?.app(uid: connected.uid)?.id),
            ])
        }
        return VarlinkReply(parameters: ["status": .object([
            "version": .string(DeviceInformation.brokerVersion),
            "startedAt": .double(startedAt.timeIntervalSince1970),
            "provisioned": .bool(record != nil),
            "mode": .string(device.information().information.mode.rawValue),
            "policyId": .optional(record?.policyID),
            "policySha256": .optional(record?.policySHA256),
            "current": .account(current?.account),
            "signedInAt": current?.signedInAt.map { .double($0.timeIntervalSince1970) } ?? .null,
            "lastAuditSequence": .int(lastSequence),
            "idle": idleValue(),
            "connections": .array(connections),
        ])])
    }
}
