import Foundation
import SharedDevice
import SharedDeviceClient

/// `devicectl account --follow`: the account changes deviced pushes, one line each (a JSON object per
/// line with `--json`), as a kiosk's shell script or an auditor's terminal watches them.
struct AccountFollow {
    /// One event as `--json` prints it.
    struct EventJSON: Encodable {
        var kind: String
        var current: DeviceAccount?
        var reason: String?
        var mode: String?
        var sequence: Int?
        var secondsLeft: Int?
    }

    /// Prints every change until the broker goes away (an error) or the process is stopped.
    static func run(_ broker: BrokerConnection, json: Bool) async throws {
        do {
            for try await event in broker.accountChanges() {
                if json { Output.jsonLine(Self.json(event)) } else { Output.print(Self.text(event)) }
            }
        } catch let error as SharedDeviceClientError {
            throw CLIError.from(error)
        }
    }

    static func json(_ event: SharedDeviceClient.AccountEvent) -> EventJSON {
        switch event {
        case .subscribed(let current, let sequence):
            EventJSON(kind: "subscribed", current: current.map(DeviceAccount.init), sequence: sequence)
        case .signedIn(let current, let sequence):
            EventJSON(kind: "signedIn", current: current.map(DeviceAccount.init), sequence: sequence)
        case .signedOut(let reason, let sequence):
            EventJSON(kind: "signedOut", reason: reason?.rawValue, sequence: sequence)
        case .switched(let current, let sequence):
            EventJSON(kind: "switched", current: current.map(DeviceAccount.init), sequence: sequence)
        case .deviceModeChanged(let mode, let sequence):
            EventJSON(kind: "deviceModeChanged", mode: mode.rawValue, sequence: sequence)
        case .idleWarning(let secondsLeft): EventJSON(kind: "idleWarning", secondsLeft: secondsLeft)
        case .idleWarningCanceled: EventJSON(kind: "idleWarningCanceled")
        }
    }

    static func text(_ event: SharedDeviceClient.AccountEvent) -> String {
        switch event {
        case .subscribed(let current, let sequence):
            "following account changes; current: \(AccountText.line(current.map(DeviceAccount.init))) (audit #\(sequence))"
        case .signedIn(let current, let sequence):
            "signed in: \(AccountText.line(current.map(DeviceAccount.init))) (audit #\(sequence))"
        case .signedOut(let reason, let sequence):
            "signed out\(reason.map { " (\($0.rawValue.forTerminal))" } ?? "") (audit #\(sequence))"
        case .switched(let current, let sequence):
            "switched to: \(AccountText.line(current.map(DeviceAccount.init))) (audit #\(sequence))"
        case .deviceModeChanged(let mode, let sequence): "device mode changed to \(mode.rawValue) (audit #\(sequence))"
        case .idleWarning(let secondsLeft):
            "idle: the worker is signed out in \(secondsLeft) s unless there is activity"
        case .idleWarningCanceled: "idle warning canceled: there was activity"
        }
    }
}
