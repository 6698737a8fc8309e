import ArgumentParser
import Foundation
import Logging

/// The administrator's command line for a shared device: provisioning from a policy, device
/// information, the audit log and the encrypted keychain store (accounts as they arrive).
@main
struct Devicectl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devicectl",
        abstract: "Manage a shared device: its encrypted keychain store, policy, accounts and audit log.",
        discussion: appRoute,
        subcommands: [
            Provision.self, Deprovision.self, Info.self, Status.self, Activity.self, ShowAccount.self,
            ListAccounts.self, SignIn.self, SignOut.self, Token.self, Call.self,
            Switch.self, CacheCommand.self, AuditCommand.self, KeychainCommand.self, PolicyCommand.self,
            KeyCommand.self,
        ]
    )

    /// The one rule of where app commands (account, signin, token, call, switch, signout, activity,
    /// keychain …) go, in the help of devicectl and of `--app`.
    static let appRoute = """
        App commands run by an app's user (anyone but root) go through the broker (deviced) only, which knows \
        the app by the caller's uid: with no broker answering they name the socket tried, why it failed and how \
        to start the broker (exit 69), and create nothing. Root is the device's administrator, never an app: \
        its --app commands act for that app on the store directly (--state-dir), whether or not a broker runs; \
        the broker hears of account changes made there at once.
        """

    /// Sets up logging once, then parses and runs the command.
    static func main() async {
        DevicectlLogging.bootstrap()
        do {
            do {
                try refuseArgumentsThatAreNotUTF8()
            } catch let error as CLIError {
                throw error.reported()
            }
            // The keychain's read commands skip ArgumentParser when their arguments are plain (PlainArgumentsParser).
            var command: any ParsableCommand
            if let plain = PlainArgumentsParser.command(
                Array(CommandLine.arguments.dropFirst()),
                environment: ProcessInfo.processInfo.environment
            ) {
                command = plain
            } else {
                command = try parseAsRoot()
            }
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

/// Swift decodes the command line as UTF-8, turning bytes that are not into U+FFFD: two different names
/// would reach the store as one. Such an argument is a usage error naming its position (exit 64).
func refuseArgumentsThatAreNotUTF8() throws {
    for index in 1..<Int(CommandLine.argc) {
        guard let argument = CommandLine.unsafeArgv[index] else { continue }
        let bytes = UnsafeBufferPointer(
            start: UnsafeRawPointer(argument).assumingMemoryBound(to: UInt8.self),
            count: strlen(argument)
        )
        guard String(validating: bytes, as: UTF8.self) == nil else { continue }
        throw CLIError(
            exitCode: .usage,
            """
            argument \(index) (after \(index > 1 ? "\"\(CommandLine.arguments[index - 1].forTerminal)\"" : "devicectl")) is not valid UTF-8; \
            names and values must be UTF-8 text
            """
        )
    }
}

/// `devicectl keychain …`, modeled on macOS's `security` tool.
struct KeychainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keychain",
        abstract: "Add, find, update, delete, list and verify items in the device's encrypted keychain store.",
        subcommands: [
            AddGenericPassword.self, FindGenericPassword.self, UpdateGenericPassword.self,
            DeleteGenericPassword.self, ListItems.self, VerifyStore.self,
        ]
    )
}
