public import BrokerContract
import Foundation
import KeychainStore
import ProcessSandbox
import SharedDevice
import Varlink

// `GetStatus`: the broker's state for an administrator (`devicectl status`).
extension Broker {
    /// The broker's state; administrators only (anyone else gets PermissionDenied).
    public func getStatus(
        _ parameters: Broker1.GetStatus.Parameters,
        context caller: BrokerCaller
    ) throws(BrokerFailure)
        -> Broker1.GetStatus.Reply
    {
        guard isAdministrator(caller) else { throw .permissionDenied }
        let (record, policy) = try currentPolicy()
        let statuses: [AccountStatus]
        let lastSequence: Int64
        do {
            statuses = try accounts.accounts()
            lastSequence = try device.lastAuditSequence()
        } catch {
            throw BrokerFailure(error)
        }
        let current = statuses.first { $0.signedIn }
        let connections = connectedCallers.map { connected in
            Broker1.Connection(
                uid: Int(connected.uid),
                pid: Int(connected.pid),
                appId: policy?.app(uid: connected.uid, sandbox: connected.sandbox)?.id,
                sandbox: Broker1.SandboxKind(connected.sandbox),
                flatpakAppId: connected.sandbox.flatpakAppID
            )
        }
        return Broker1.GetStatus.Reply(
            status: Broker1.BrokerStatus(
                version: SharedDevice.DeviceInformation.brokerVersion,
                startedAt: startedAt.timeIntervalSince1970,
                provisioned: record != nil,
                mode: Broker1.DeviceMode(device.information().information.mode),
                policyId: record?.policyID,
                policySha256: record?.policySHA256,
                current: current.map { Broker1.Account($0.account) },
                signedInAt: current?.signedInAt?.timeIntervalSince1970,
                lastAuditSequence: Int(lastSequence),
                idle: idleState(),
                connections: connections,
                msalClients: msalClientsStatus,
                diskReserve: hasDiskReserve,
                shiftSession: shiftSessionStatus,
                flatpakUnavailable: policy?.hasFlatpakApps == true ? flatpakUnavailableReason : nil
            )
        )
    }
}
