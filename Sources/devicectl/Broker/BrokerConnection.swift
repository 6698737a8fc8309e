import BrokerContract
import DeviceLocations
import Foundation
import Logging
import SharedDeviceClient
import Varlink

/// The running broker as devicectl reaches it, with the client an app links, in the client's types only:
/// the app-facing `PublicClientApplication` for the app commands (and `GetCaller`, on the same pooled
/// connection), and the interface client for what the application does not wrap (`GetStatus` for
/// administrators, an administrator's sign-out). `BrokerConnection+Calls` answers in the library's types,
/// so both routes print alike; a refusal is the `CLIError` the same failure is in-process.
struct BrokerConnection: Sendable {
    /// The broker's socket.
    let socketPath: String
    /// The app-facing client.
    let application: PublicClientApplication
    /// The interface client, for the methods the application does not wrap.
    let interface: BrokerInterfaceClient

    /// The broker at `socketPath`, trusted when it runs as root, as this user, or as a user
    /// `$DEVICECTL_BROKER_UID` names.
    init(socketPath: String, logger: Logger) {
        let endpoint = BrokerEndpoint(socketPath: socketPath, alsoTrusted: DeviceLocations.alsoTrustedBrokerUIDs())
        self.socketPath = socketPath
        application = PublicClientApplication(endpoint: endpoint, logger: logger)
        interface = BrokerInterfaceClient(endpoint: endpoint, logger: logger)
    }

    /// Whether something accepts connections at `socketPath` now (nothing is sent; who it is is checked
    /// by the first call).
    static func isListening(at socketPath: String) -> Bool {
        (try? VarlinkConnection(unixSocketPath: socketPath)) != nil
    }

    // MARK: - The broker

    /// Who the broker takes this process to be, and the store it serves.
    typealias Caller = (uid: Int, appID: String?, stateDirectory: String?)

    /// Who the broker takes this process to be, and the store it serves.
    func caller() async throws -> Caller {
        let caller = try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
            try await application.caller()
        }
        return (caller.uid, caller.appID, caller.stateDirectory)
    }

    /// Every account change the broker pushes from now on, the first being `subscribed`.
    func accountChanges() -> AsyncThrowingStream<AccountEvent, any Error> {
        application.accountChanges()
    }

    /// How the worker signs in through the broker: the device code shown by `showCode`, or the browser.
    enum SignInFlow: Sendable {
        case deviceCode(showCode: @Sendable (String) -> Void)
        case browser(prompt: String?, openBrowser: @Sendable (URL) -> Void)
        case password(username: String, password: String)

        var clientFlow: InteractiveFlow {
            switch self {
            case .deviceCode(let showCode): .deviceCode { verification in showCode(verification.instructions) }
            case .browser(let prompt, let openBrowser): .browser(prompt: prompt) { url in openBrowser(url) }
            case .password(let username, let password): .password(username: username, password: password)
            }
        }
    }
}

extension DeviceCodeVerification {
    /// "To sign in, open URL and enter the code CODE", as the engine's device-code session says it.
    var instructions: String { "To sign in, open \(verificationURI) and enter the code \(userCode)" }
}
