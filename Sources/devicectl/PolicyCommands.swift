import ArgumentParser
import Foundation
import SharedDevice

/// `devicectl policy …`: work with device policy files.
struct PolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "Check device policy files.",
        subcommands: [ValidatePolicy.self]
    )
}

/// What a valid policy may still get wrong, said on standard error without failing the command.
enum PolicyWarnings {
    /// Warns of every app whose first (default) access group another app shares: the app's items stored
    /// without a group would be the other apps' to read and delete.
    static func report(_ policy: DevicePolicy, file: String) {
        for shared in policy.sharedDefaultGroups {
            FileHandle.standardError.write(
                Data("devicectl: warning: \(file.forTerminal): \(shared.message.forTerminal)\n".utf8)
            )
        }
    }
}

struct ValidatePolicy: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Decode a policy strictly; exit 65 naming the JSON path of the first problem.",
        discussion:
            "A valid policy whose app lists first a group another app shares is warned of on standard error (exit 0)."
    )

    @Argument(help: "The policy file.") var file: String
    @OptionGroup var output: OutputOptions

    func run() throws {
        try runReportingErrors {
            let policy: DevicePolicy
            do {
                policy = try DevicePolicy.load(contentsOf: URL(fileURLWithPath: file))
            } catch {
                throw CLIError(exitCode: .badInput, "invalid policy \(file): \(error)")
            }
            PolicyWarnings.report(policy, file: file)
            if output.json {
                try Output.json(policy)
            } else {
                Output.print(
                    "\(file): valid \(policy.device.mode.rawValue)-mode policy for \"\(policy.device.name)\" with \(policy.apps.count) app(s)"
                )
            }
        }
    }
}
