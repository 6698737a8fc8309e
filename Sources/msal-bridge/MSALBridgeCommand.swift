import ArgumentParser
import DeviceLocations
import Foundation
import Logging
import MSALBridge
import SharedDeviceClient

/// The MSAL bridge: owns `com.microsoft.identity.broker1` on the user's session bus (D-Bus activation
/// starts it) and answers Microsoft's Linux broker protocol from `deviced`, as this user. It holds no
/// token: every answer comes from the broker, which knows the app by this process's uid, or, for a caller
/// in a Flatpak sandbox, by that caller's process, which the bridge hands it (`ActForCaller`).
@main
struct MSALBridgeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "msal-bridge",
        abstract:
            "Answer MSAL apps (Microsoft's Linux broker protocol on the session bus) from the shared device's broker.",
        discussion: """
            Started by D-Bus activation (/usr/share/dbus-1/services/com.microsoft.identity.broker1.service) on \
            the session bus of an app's user. It serves until the session bus closes. Tokens it answers expire \
            at most 290 s ahead, so every MSAL app asks again within 290 s of a shift change; at a sign-out it \
            deletes MSALRuntime's items (schema com.microsoft.identity.secret) from the user's Secret Service.
            """
    )

    @Option(help: "The broker's socket (default: $DEVICECTL_SOCKET, else /run/devicectl/broker.sock).")
    var socket: String?

    @Option(
        help:
            "The device's interactive sign-in when nobody is signed in: deviceCode, browser (xdg-open), or auto (browser when a display is set and xdg-open exists)."
    )
    var flow: FlowChoice = .auto

    @Option(
        help: "Seconds an interactive sign-in may take before it is canceled (MSAL gives up on a call after 300 s)."
    )
    var interactiveTimeout: Int = 240

    @Option(help: "trace, debug, info, notice, warning, error or critical (standard error; never a token).")
    var logLevel: String = "info"

    enum FlowChoice: String, ExpressibleByArgument, Sendable {
        case auto, deviceCode, browser
    }

    func validate() throws {
        guard (10...280).contains(interactiveTimeout) else {
            throw ValidationError(
                "--interactive-timeout must be 10 to 280 seconds (MSAL gives up on a call after 300 s)"
            )
        }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level \(logLevel)") }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "msal-bridge")
        // Own the name first (MSALRuntime's Ping gives up after about 5 s); the broker is reached per call.
        let bus: SessionBus
        do {
            bus = try SessionBus(logger: logger)
        } catch {
            logger.error("\(error)")
            throw ExitCode(69)
        }
        let endpoint = BrokerEndpoint(
            socketPath: DeviceLocations.brokerSocket(explicit: socket),
            alsoTrusted: DeviceLocations.alsoTrustedBrokerUIDs()
        )
        let application = PublicClientApplication(endpoint: endpoint, logger: logger)
        let handler = BrokerProtocolHandler(
            application: application,
            flow: signInFlow(bus: bus, logger: logger),
            interactiveDeadline: .seconds(interactiveTimeout),
            logger: logger
        )
        do {
            try bus.serve(
                name: "com.microsoft.identity.broker1",
                path: "/com/microsoft/identity/broker1",
                interface: "com.microsoft.identity.Broker1",
                busyReply: BrokerProtocolMessages.errorReply(
                    .serverTemporarilyUnavailable,
                    "the bridge has too many calls in progress; try again"
                )
            ) { call in
                // The bridge calls deviced as its own user, which deviced takes for that user's host app; a
                // sandboxed caller is handed to deviced by its pidfd (ActForCaller) and served as its own app.
                await handler.handle(call)
            }
        } catch {
            logger.error("\(error)")
            throw ExitCode(69)
        }
        logger.info(
            "msal-bridge serving com.microsoft.identity.broker1",
            metadata: ["broker.socket": "\(endpoint.socketPath)"]
        )
        let watcher = SignOutWatcher(application: application, bus: bus, logger: logger)
        Task.detached { await watcher.run() }
        let status = bus.run()
        throw ExitCode(status)
    }

    /// The device's interactive sign-in, as `--flow` says.
    private func signInFlow(bus: SessionBus, logger: Logger) -> BrokerProtocolHandler.SignInFlow {
        let environment = ProcessInfo.processInfo.environment
        let opener = "/usr/bin/xdg-open"
        let hasDisplay =
            environment["DISPLAY"].map { !$0.isEmpty } ?? false
            || environment["WAYLAND_DISPLAY"].map { !$0.isEmpty } ?? false
        let browser =
            flow == .browser || (flow == .auto && hasDisplay && FileManager.default.isExecutableFile(atPath: opener))
        if browser {
            return .browser(open: { url in
                logger.notice("opening the sign-in page in the browser")
                let process = Process()
                process.executableURL = URL(fileURLWithPath: opener)
                process.arguments = [url.absoluteString]
                do { try process.run() } catch { logger.error("cannot open the browser with \(opener): \(error)") }
            })
        }
        return .deviceCode(show: { verification in
            let text =
                verification.message
                ?? "To sign in, open \(verification.verificationURI) and enter the code \(verification.userCode)"
            // The code is for the worker's eyes: on screen (a desktop notification) and in the session's log.
            logger.notice("\(text)")
            bus.notify(summary: "Sign in to this shared device", body: text)
        })
    }
}
