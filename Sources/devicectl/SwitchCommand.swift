import ArgumentParser
import Foundation
import IdentityClient
import SharedDevice

/// `devicectl switch`: the shift change. The current worker is signed out of every app (committed
/// first), then the next one signs in by device code (default) or browser; or, with `--token-response`,
/// from a given token endpoint response (admin and test path).
struct Switch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "switch",
        abstract: "Shift change: sign the current worker out everywhere and the next one in, as one audited step.",
        discussion: """
            The sign-out is committed first; then the next worker signs in by device code (default) or browser (--flow browser). \
            The three audit events (signed out, signed in, switched) share one correlation id. \
            If the sign-in fails or is canceled, the device stays signed out and the error says so (non-zero exit). \
            Through the broker when it runs and the caller is not root (as the caller's app); else straight to the store (--app).
            """
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var caller: CallerOptions
    @Option(help: "How the next worker signs in.") var flow: SignIn.Flow = .deviceCode
    @Option(help: ArgumentHelp("Prefill the next worker's username at the authority (login hint).", valueName: "hint"))
    var username: String?
    @Flag(
        help:
            "--flow password: read the next worker's password from standard input (else it is typed at the terminal without echo)."
    ) var passwordStdin = false
    @Option(help: ArgumentHelp("Prompt: select_account, login, consent or none (browser flow).", valueName: "prompt"))
    var prompt: String?
    @Option(
        help: ArgumentHelp(
            "Scopes, space- or comma-separated, repeatable (default: the policy's).",
            valueName: "scopes"
        )
    ) var scopes: [String] = []
    @Option(
        help: ArgumentHelp(
            "Sign the next worker in from this token endpoint response (JSON) instead.",
            valueName: "file"
        )
    )
    var tokenResponse: String?
    @Option(help: ArgumentHelp("Why the previous worker leaves: shift-end (default) or user.", valueName: "reason"))
    var reason: String = SignOutReason.shiftEnd.rawValue
    @OptionGroup var output: OutputOptions

    struct Summary: Encodable {
        var signedOut: DeviceAccount?
        var signedIn: DeviceAccount?
        var correlationId: String?
        var error: String?
    }

    func run() async throws {
        try await runReportingErrors {
            let parsedReason = try signOutReason(reason) ?? .shiftEnd
            if let tokenResponse { return try switchFromFile(tokenResponse, reason: parsedReason) }
            guard parsedReason == .shiftEnd || parsedReason == .user else {
                throw CLIError(exitCode: .usage, "a switch's reason is shift-end or user")
            }
            let json = output.json
            let credentials = try flow.credentials(username: username, passwordStdin: passwordStdin)
            if case .broker(let broker, _) = try await BrokerRoute.choose(
                app: caller.app,
                stateDir: store.stateDir,
                logger: store.logger
            ) {
                return try await switchThroughBroker(broker, reason: parsedReason, credentials: credentials)
            }
            let context = try ApplicationContext(store, app: caller.app)
            let parameters = InteractiveTokenParameters(
                scopes: parseScopes(scopes),
                flow: flow.interactiveFlow(json: json, credentials: credentials),
                prompt: try SignIn.prompt(prompt),
                loginHint: username
            )
            let previous = PreviousWorker()
            let result = try await reportingAsyncErrors { () async throws(SharedDeviceError) in
                try await context.application.switchWorker(parameters, reason: parsedReason) { signedOut in
                    previous.set(signedOut?.account)
                    Output.progress("signed out: \(AccountText.line(signedOut?.account))", json: json)
                }
            }
            if json {
                try Output.json(
                    Summary(signedOut: previous.account, signedIn: result.account, correlationId: result.correlationID)
                )
            } else {
                Output.print("signed in: \(AccountText.line(result.account))")
            }
        }
    }

    /// The same switch done by the broker: the code (or the browser) is shown here, the tokens stay in the broker.
    private func switchThroughBroker(
        _ broker: BrokerConnection,
        reason: SignOutReason,
        credentials: SignIn.Credentials?
    ) async throws {
        let json = output.json
        let previous = PreviousWorker()
        let result = try await broker.switchWorker(
            scopes: parseScopes(scopes),
            reason: reason,
            loginHint: username,
            flow: flow.brokerFlow(prompt: prompt, json: json, credentials: credentials)
        ) { account in
            previous.set(account)
            Output.progress("signed out: \(AccountText.line(account))", json: json)
        }
        if json {
            try Output.json(
                Summary(signedOut: previous.account, signedIn: result.account, correlationId: result.correlationID)
            )
        } else {
            Output.print("signed in: \(AccountText.line(result.account))")
        }
    }

    private func switchFromFile(_ path: String, reason: SignOutReason) throws {
        let context = try AccountContext(store)
        let identity = try caller.identity(in: context.store)
        let response = try AccountContext.tokenResponse(path)
        let request = try context.requestContext()
        let outcome = try reportingDeviceErrors { () throws(SharedDeviceError) in
            try context.accounts.switchAccount(to: response, context: request, app: identity, reason: reason)
        }
        if output.json {
            try Output.json(
                Summary(
                    signedOut: outcome.signedOut?.account,
                    signedIn: outcome.signedIn,
                    correlationId: outcome.correlationID,
                    error: outcome.signInError?.description
                )
            )
        } else {
            Output.print("signed out: \(AccountText.line(outcome.signedOut?.account))")
            Output.print("signed in: \(AccountText.line(outcome.signedIn))")
        }
        if let error = outcome.signInError {
            _ = try reportingDeviceErrors { () throws(SharedDeviceError) in
                throw error.afterSwitchSignOut(outcome.signedOut?.account)
            }
        }
    }
}

/// The worker a switch signed out, as its callback reported.
private final class PreviousWorker: @unchecked Sendable {
    private let lock = NSLock()
    private var value: DeviceAccount?
    var account: DeviceAccount? { lock.withLock { value } }
    func set(_ account: DeviceAccount?) { lock.withLock { value = account } }
}
