import ArgumentParser
import DeviceLocations
import Foundation
import Logging
import SharedDevice

/// `devicectl activity`: tells the broker the worker is active, for a kiosk shell or launcher that sees
/// input (e.g. from an idle hook): the idle sign-out clock starts again and a warning is canceled.
struct Activity: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "activity",
        abstract:
            "Tell the broker the worker is active: the idle sign-out clock starts again and a warning that was out is canceled.",
        discussion:
            "Through the running broker, as the caller's app (or an administrator). Prints the idle clock; exit 69 when no broker runs."
    )

    @Option(
        help: ArgumentHelp(
            "The broker's socket (default: $DEVICECTL_SOCKET, else \(DeviceLocations.systemBrokerSocket)).",
            valueName: "path"
        )
    )
    var socket: String?
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await runReportingErrors {
            // The idle clock lives in the broker: only a running one has it.
            let (broker, _) = try await BrokerRoute.requiredBroker(
                socket: socket,
                logger: Logger(label: DevicectlLogging.label)
            )
            let idle = try await broker.reportActivity()
            if output.json {
                try Output.json(idle)
            } else if let idle {
                if let signOutIn = idle.signOutIn {
                    Output.print(
                        "active: the worker is signed out after \(Int(signOutIn.rounded(.up))) s without activity"
                    )
                } else {
                    Output.print("active: nobody is signed in (idle sign-out after \(idle.idleSignOutSeconds) s)")
                }
            } else {
                Output.print("active: the device policy sets no idle sign-out")
            }
        }
    }
}
