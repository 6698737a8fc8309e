import ArgumentParser
import Foundation
import SharedDevice

/// `devicectl policy …`: work with device policy files.
struct PolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "Check device policy files.",
        subcommands: [ValidatePolicy.self])
}

struct ValidatePolicy: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Decode a policy strictly; exit 65 naming the JSON path of the first problem.")

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
            if output.json {
                try Output.json(policy)
            } else {
                Output.print("\(file): valid \(policy.device.mode.rawValue)-mode policy for \"\(policy.device.name)\" with \(policy.apps.count) app(s)")
            }
        }
    }
}
