import ArgumentParser
import Foundation
import IdentityClient
import KeychainStore
import SharedDevice

/// `devicectl signin --app ID [--flow device-code|browser|password] [--username HINT]`: an interactive sign-in
/// against the policy's authority (or, with `--token-response`, caching a given response).
struct SignIn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signin",
        abstract: "Sign a worker in for an app at the device policy's authority (device code, browser or password).",
        discussion: """
            Device code (default): prints "To sign in, open URL and enter the code CODE" and waits, showing the time left. \
            Browser: opens $DEVICECTL_BROWSER or xdg-open on a loopback redirect, or prints the URL. \
            Password (where the policy's authority.flows lists it): --username U, the password from standard input with \
            --password-stdin or typed at the terminal without echo; a wrong one is exit 55, and after repeated failures the \
            device holds password sign-ins back (exit 75). \
            Shared mode refuses while another worker is signed in (exit 48); the same worker in a second app is single sign-on. \
            --token-response caches a given token endpoint response instead (admin and test path: the file is trusted).
            """
    )

    enum Flow: String, ExpressibleByArgument, CaseIterable {
        case deviceCode = "device-code"
        case browser, password

        /// The flow as devicectl runs it: the code on standard output (standard error with --json) and a
        /// countdown, the system browser, or the worker's username and password.
        func interactiveFlow(json: Bool, credentials: Credentials?) -> InteractiveFlow {
            switch self {
            case .deviceCode:
                .deviceCode(
                    showCode: { session in Output.progress(session.message, json: json) },
                    progress: DeviceCodeCountdown().report
                )
            case .browser:
                .browser(openBrowser: SystemBrowser.open)
            case .password:
                .password(username: credentials?.username ?? "", password: credentials?.password ?? "")
            }
        }

        /// The flow as devicectl shows it when the broker signs the worker in.
        func brokerFlow(prompt: String?, json: Bool, credentials: Credentials?) -> BrokerConnection.SignInFlow {
            switch self {
            case .deviceCode: .deviceCode { instructions in Output.progress(instructions, json: json) }
            case .browser: .browser(prompt: prompt, openBrowser: SignIn.openFromBroker)
            case .password: .password(username: credentials?.username ?? "", password: credentials?.password ?? "")
            }
        }

        /// For `--flow password`: `--username` and the password (`--password-stdin`, or typed without echo).
        func credentials(username: String?, passwordStdin: Bool) throws -> Credentials? {
            guard self == .password else {
                guard !passwordStdin else {
                    throw CLIError(exitCode: .usage, "--password-stdin is for --flow password")
                }
                return nil
            }
            guard let username, !username.isEmpty else {
                throw CLIError(exitCode: .usage, "--flow password needs --username")
            }
            return Credentials(
                username: username,
                password: try PasswordInput.read(fromStandardInput: passwordStdin, username: username)
            )
        }
    }

    /// A worker's username and password for the password flow.
    struct Credentials {
        var username: String
        var password: String
    }

    /// Parses `--prompt`.
    static func prompt(_ text: String?) throws -> Prompt? {
        try text.map { text in
            guard let value = Prompt(rawValue: text) else {
                throw CLIError(
                    exitCode: .usage,
                    "unknown prompt \(text); use one of: \(Prompt.allCases.map(\.rawValue).joined(separator: ", "))"
                )
            }
            return value
        }
    }

    @OptionGroup var store: StoreLocation
    @OptionGroup var caller: CallerOptions
    @Option(help: "How the worker signs in.") var flow: Flow = .deviceCode
    @Option(
        help: ArgumentHelp(
            "Prefill the worker's username at the authority (login hint); the username of --flow password.",
            valueName: "hint"
        )
    ) var username: String?
    @Flag(
        help: "--flow password: read the password from standard input (else it is typed at the terminal without echo)."
    ) var passwordStdin = false
    @Option(help: ArgumentHelp("Prompt: select_account, login, consent or none (browser flow).", valueName: "prompt"))
    var prompt: String?
    @Option(
        help: ArgumentHelp(
            "Scopes, space- or comma-separated, repeatable (default: the policy's).",
            valueName: "scopes"
        )
    ) var scopes: [String] = []
    @OptionGroup var authority: AuthorityOption
    @Option(help: ArgumentHelp("Cache this token endpoint response (JSON) instead of signing in.", valueName: "file"))
    var tokenResponse: String?
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await runReportingErrors {
            if let tokenResponse { return try signInFromFile(tokenResponse) }
            let credentials = try flow.credentials(username: username, passwordStdin: passwordStdin)
            if case .broker(let broker, _) = try await BrokerRoute.choose(
                app: caller.app,
                stateDir: store.stateDir,
                logger: store.logger
            ) {
                return try await signInThroughBroker(broker, credentials: credentials)
            }
            let context = try ApplicationContext(store, app: caller.requiredApp(), authority: authority.authority)
            guard caller.entitlements == nil else {
                throw CLIError(
                    exitCode: .usage,
                    "this device is provisioned, so app entitlements come from its policy; drop --entitlements"
                )
            }
            let parameters = InteractiveTokenParameters(
                scopes: parseScopes(scopes),
                flow: flow.interactiveFlow(json: output.json, credentials: credentials),
                prompt: try Self.prompt(prompt),
                loginHint: username
            )
            let result = try await reportingAsyncErrors { () async throws(SharedDeviceError) in
                try await context.application.acquireToken(parameters)
            }
            if output.json {
                try Output.json(TokenJSON(result, includeSecret: false))
            } else {
                Output.print(
                    "signed in: \(AccountText.line(result.account))\nscopes: \(result.scopes.joined(separator: " "))"
                )
            }
        }
    }

    /// The same sign-in done by the broker, as the caller's own app: the code (or the browser) is shown
    /// here, the tokens stay in the broker.
    private func signInThroughBroker(_ broker: BrokerConnection, credentials: Credentials?) async throws {
        let result = try await broker.signIn(
            scopes: parseScopes(scopes),
            loginHint: username,
            flow: flow.brokerFlow(prompt: prompt, json: output.json, credentials: credentials),
            authority: authority.authority
        )
        if output.json {
            try Output.json(TokenJSON(result, includeSecret: false))
        } else {
            Output.print(
                "signed in: \(AccountText.line(result.account))\nscopes: \(result.scopes.joined(separator: " "))"
            )
        }
    }

    /// Opens the authorization URL the broker sent; when no browser
    /// opens, the URL is printed for the worker.
    @Sendable static func openFromBroker(_ url: URL) {
        do throws(IdentityError) {
            try SystemBrowser.openNow(url)
        } catch {
            FileHandle.standardError.write(
                Data("devicectl: \(error.message)\nopen this URL: \(url.absoluteString)\n".utf8)
            )
        }
    }

    private func signInFromFile(_ path: String) throws {
        let context = try AccountContext(store)
        let identity = try caller.identity(in: context.store)
        let response = try AccountContext.tokenResponse(path)
        let request = try context.requestContext()
        let account = try reportingDeviceErrors { () throws(SharedDeviceError) in
            try context.accounts.signIn(response, context: request, app: identity)
        }
        if output.json { try Output.json(account) } else { Output.print("signed in: \(AccountText.line(account))") }
    }
}
