import ArgumentParser
import DeviceLocations
import Foundation
import KeychainStore
import SharedDevice

/// `devicectl status`: is the broker running, and the device's state (from the broker when it runs, else
/// from the store).
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract:
            "Show the broker daemon's state: running or not, socket, policy, current worker and since when, idle clock, connected apps, last audit sequence.",
        discussion:
            "With the broker running this asks it (root or the policy's administratorsGroup); without it, root reads the store."
    )

    @OptionGroup var store: StoreLocation
    @Option(
        help: ArgumentHelp(
            "The broker's socket (default: $DEVICECTL_SOCKET, else \(DeviceLocations.systemBrokerSocket)).",
            valueName: "path"
        )
    )
    var socket: String?
    @OptionGroup var output: OutputOptions

    /// `--json`: the broker part is null when it does not run.
    struct Summary: Encodable {
        struct Broker: Encodable {
            var socket: String
            var running: Bool
            var version: String?
            var startedAt: Date?
            var connections: [BrokerStatus.Connection]
            /// MSAL apps' client ids seen through the MSAL bridge.
            var msalClients: [BrokerStatus.MSALClient]
            /// Whether the broker's disk reserve for sign-outs on a full disk is in place (null: not running).
            var diskReserve: Bool? = nil
            /// Why the policy's Flatpak apps are refused on this device (null: served, none listed, or not running).
            var flatpakUnavailable: String? = nil
        }
        var broker: Broker
        var provisioned: Bool
        var mode: String
        var policyId: String?
        var policySha256: String?
        var current: DeviceAccount?
        var signedInAt: Date?
        var lastAuditSequence: Int64
        /// The idle sign-out clock (the broker keeps it; null without one).
        var idle: IdleState?
        /// The login session the worker's shift runs in (the broker keeps it; null without one).
        var shiftSession: BrokerStatus.ShiftSession?
    }

    func run() async throws {
        try await runReportingErrors {
            let path = DeviceLocations.brokerSocket(explicit: socket)
            let summary: Summary
            if let broker = try await BrokerRoute.runningBroker(
                socket: path,
                stateDir: store.stateDir,
                logger: store.logger
            ) {
                let status = try await broker.status()
                summary = Summary(
                    broker: .init(
                        socket: path,
                        running: true,
                        version: status.version,
                        startedAt: status.startedAt,
                        connections: status.connections,
                        msalClients: status.msalClients,
                        diskReserve: status.diskReserve,
                        flatpakUnavailable: status.flatpakUnavailable
                    ),
                    provisioned: status.provisioned,
                    mode: status.mode,
                    policyId: status.policyID,
                    policySha256: status.policySHA256,
                    current: status.current,
                    signedInAt: status.signedInAt,
                    lastAuditSequence: status.lastAuditSequence,
                    idle: status.idle,
                    shiftSession: status.shiftSession
                )
            } else {
                summary = try storeSummary(socket: path)
            }
            if output.json { try Output.json(summary) } else { Output.print(Self.text(summary)) }
        }
    }

    /// The state from the store itself (the broker is not running).
    private func storeSummary(socket: String) throws -> Summary {
        let notRunning = Summary.Broker(
            socket: socket,
            running: false,
            version: nil,
            startedAt: nil,
            connections: [],
            msalClients: []
        )
        let database = store.directory.appendingPathComponent(KeychainStore.databaseFileName)
        guard FileManager.default.fileExists(atPath: database.path) else {
            return Summary(
                broker: notRunning,
                provisioned: false,
                mode: DeviceInformation.Mode.private.rawValue,
                policyId: nil,
                policySha256: nil,
                current: nil,
                signedInAt: nil,
                lastAuditSequence: 0
            )
        }
        let context = try AccountContext(store)
        let record = try reportingDeviceErrors { () throws(SharedDeviceError) in try context.device.record() }
        let statuses = try reportingDeviceErrors { () throws(SharedDeviceError) in try context.accounts.accounts() }
        let last = try reportingDeviceErrors { () throws(SharedDeviceError) in try context.device.lastAuditSequence() }
        let current = statuses.first { $0.signedIn }
        return Summary(
            broker: notRunning,
            provisioned: record != nil,
            mode: context.device.information().information.mode.rawValue,
            policyId: record?.policyID,
            policySha256: record?.policySHA256,
            current: current?.account,
            signedInAt: current?.signedInAt,
            lastAuditSequence: last
        )
    }

    static func text(_ summary: Summary) -> String {
        let time = ISO8601DateFormatter()
        var lines: [String] = []
        if summary.broker.running {
            lines.append(
                "broker: running on \(summary.broker.socket) (deviced \(summary.broker.version ?? "?")"
                    + (summary.broker.startedAt.map { ", since \(time.string(from: $0))" } ?? "") + ")"
            )
            lines.append("connections: \(summary.broker.connections.count)")
            for connection in summary.broker.connections {
                let sandbox =
                    connection.flatpakAppID.map { " (flatpak \($0.forTerminal))" }
                    ?? (connection.sandbox == "unidentified" ? " (sandbox unidentified)" : "")
                lines.append(
                    "  uid \(connection.uid)\(sandbox) \(connection.appID?.forTerminal ?? "(no app)") pid \(connection.pid)"
                )
            }
            if let reason = summary.broker.flatpakUnavailable {
                lines.append(
                    "Flatpak apps: REFUSED: \(reason.forTerminal); the policy's uid-only apps are served as before"
                )
            }
            lines.append("MSAL clients (through the MSAL bridge): \(summary.broker.msalClients.count)")
            for client in summary.broker.msalClients {
                lines.append(
                    "  \(client.clientID.forTerminal) uid \(client.uid) \(client.appID?.forTerminal ?? "(no app)"): \(client.calls) calls"
                        + (client.refused > 0 ? ", \(client.refused) refused (not in the policy's msalClientIds)" : "")
                        + ", last \(time.string(from: client.lastCall))"
                )
            }
            switch summary.broker.diskReserve {
            case true?: lines.append("disk reserve: in place (space kept for sign-outs on a full disk)")
            case false?:
                lines.append(
                    """
                    disk reserve: MISSING: the state directory's filesystem is full, and a sign-out on it may fail; free space \
                    there (the broker makes the reserve again within seconds), and keep the state directory on a filesystem \
                    unprivileged users cannot fill
                    """
                )
            case nil: break
            }
        } else {
            lines.append("broker: not running (no broker answers on \(summary.broker.socket))")
        }
        if summary.provisioned {
            lines.append(
                "device: \(summary.mode.forTerminal) mode, policy \(summary.policyId?.forTerminal ?? "(no id)") sha256 \(summary.policySha256?.forTerminal ?? "?")"
            )
        } else {
            lines.append("device: not provisioned")
        }
        if let current = summary.current {
            lines.append(
                "worker: \(AccountText.line(current))"
                    + (summary.signedInAt.map { ", signed in since \(time.string(from: $0))" } ?? "")
            )
        } else {
            lines.append("worker: nobody signed in")
        }
        if let idle = summary.idle {
            var line = "idle sign-out: after \(idle.idleSignOutSeconds) s, warning \(idle.warningSeconds) s before"
            if let idleSeconds = idle.idleSeconds, let signOutIn = idle.signOutIn {
                line += "; idle for \(Int(idleSeconds)) s, signs out in \(Int(signOutIn.rounded(.up))) s"
                if idle.warning { line += " (warning shown)" }
            }
            lines.append(line)
        }
        if let session = summary.shiftSession {
            let place = [session.service, session.tty, session.seat, session.remoteHost].compactMap { $0 }
            lines.append(
                "shift session: \(session.sessionId.forTerminal) as \(session.user.forTerminal) (\(place.joined(separator: ", ").forTerminal)), opened \(time.string(from: session.openedAt)); a sign-out will \(session.onSignOut == "none" ? "leave it running" : session.onSignOut.forTerminal + " it")"
            )
        }
        lines.append("audit: last sequence \(summary.lastAuditSequence)")
        return lines.joined(separator: "\n")
    }
}
