import ArgumentParser
import Foundation
import Synchronization
import IdentityClient
import KeychainStore
import SharedDevice
#if canImport(Glibc)
import Glibc
#endif

/// Shared plumbing of the commands that talk to the sign-in authority: the app's
/// `PublicClientApplication` under the device policy.
struct ApplicationContext {
    let application: PublicClientApplication

    init(_ location: StoreLocation, app: String) throws {
        let store = try location.open()
        let device = ManagedDevice(store: store)
        guard let policy = try reportingDeviceErrors({ () throws(SharedDeviceError) in try device.policy() }) else {
            throw CLIError(exitCode: .unavailable,
                "the device is not provisioned, so it has no sign-in authority; run `devicectl provision --policy FILE` first")
        }
        application = try reportingDeviceErrors { () throws(SharedDeviceError) in
            try PublicClientApplication(configuration: PublicClientApplicationConfiguration(appID: app, policy: policy), device: device)
        }
    }
}

/// Scopes given as separate words, or comma- or space-separated in one.
func parseScopes(_ values: [String]) -> [String] {
    values.flatMap { $0.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init) }
}

/// Runs `body`; a `SharedDeviceError` (including the identity client's) becomes its documented exit code.
func reportingAsyncErrors<T>(_ body: () async throws(SharedDeviceError) -> T) async throws -> T {
    do {
        return try await body()
    } catch {
        throw CLIError.from(error)
    }
}

/// Runs `body`; an `IdentityError` becomes its documented exit code.
func reportingIdentityErrors<T>(_ body: () async throws(IdentityError) -> T) async throws -> T {
    do {
        return try await body()
    } catch {
        throw CLIError.from(SharedDeviceError(error))
    }
}


extension CLIError {
    /// The documented exit code and message of a shared-device error.
    static func from(_ error: SharedDeviceError) -> CLIError {
        if let identityError = error.identityError {
            return CLIError(exitCode: DevicectlExit.forIdentityCode(identityError.code), identityError.description)
        }
        if let storeError = error.storeError {
            return CLIError(exitCode: DevicectlExit.forCode(storeError.code), storeError.description)
        }
        return CLIError(exitCode: DevicectlExit.forAccountCode(error.code) ?? DevicectlExit.forCode(error.code), error.description)
    }
}

extension AsyncParsableCommand {
    /// Runs the command body, printing `CLIError`s as `devicectl: error: …` and exiting with their code.
    func runReportingErrors(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as CLIError {
            throw error.reported()
        }
    }
}

/// Where the browser flow sends the user: `$DEVICECTL_BROWSER URL` when set, else `xdg-open URL` when a
/// desktop session is there, else the URL printed for the user to open on this machine.
enum SystemBrowser {
    static func open(_ url: URL) async throws(IdentityError) {
        let environment = ProcessInfo.processInfo.environment
        if let command = environment["DEVICECTL_BROWSER"], !command.isEmpty {
            try run(["/bin/sh", "-c", "\(command) \"$0\"", url.absoluteString], name: "DEVICECTL_BROWSER")
            return
        }
        let desktop = environment["DISPLAY"] != nil || environment["WAYLAND_DISPLAY"] != nil
        if desktop, let xdgOpen = ["/usr/bin/xdg-open", "/bin/xdg-open"].first(where: FileManager.default.isExecutableFile(atPath:)) {
            try run([xdgOpen, url.absoluteString], name: "xdg-open")
            return
        }
        Output.print("To sign in, open this URL in a browser on this device:\n\(url.absoluteString)")
    }

    /// Starts the opener and returns; it may still be running while the redirect arrives.
    private static func run(_ arguments: [String], name: String) throws(IdentityError) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.standardOutput = FileHandle.standardError  // standard output stays the command's result
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw IdentityError(.userCanceled, "cannot start the browser (\(name)); set DEVICECTL_BROWSER or use --flow device-code")
        }
    }
}

/// The time left, as `14:32`.
func clock(_ seconds: Int) -> String {
    String(format: "%d:%02d", max(seconds, 0) / 60, max(seconds, 0) % 60)
}

/// An authentication result as `devicectl` prints it: no token unless asked.
struct TokenJSON: Encodable {
    var account: DeviceAccount
    var scopes: [String]
    var expiresOn: Date?
    var source: String
    var correlationId: String
    var accessToken: String?

    init(_ result: AuthenticationResult, includeSecret: Bool) {
        account = result.account
        scopes = result.scopes
        expiresOn = result.expiresOn
        source = result.source.rawValue
        correlationId = result.correlationID
        accessToken = includeSecret ? result.accessToken : nil
    }
}

enum TokenText {
    static func lines(_ result: AuthenticationResult, printSecret: Bool) -> String {
        var text = "account: \(AccountText.line(result.account))\nscopes: \(result.scopes.joined(separator: " "))"
        if let expiresOn = result.expiresOn {
            let minutes = Int(expiresOn.timeIntervalSinceNow / 60)
            text += "\nexpires: \(ISO8601DateFormatter().string(from: expiresOn)) (in \(minutes) min)"
        }
        text += "\nsource: \(result.source.rawValue)"
        if printSecret { text += "\naccess token: \(result.accessToken)" }
        return text
    }
}

/// `devicectl signin --app ID [--flow device-code|browser] [--username HINT]`: an interactive sign-in
/// against the policy's authority (or, with `--token-response`, caching a given response).
struct SignIn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signin",
        abstract: "Sign a worker in for an app at the device policy's authority (device code or browser).",
        discussion: """
        Device code (default): prints "To sign in, open URL and enter the code CODE" and waits, showing the time left. \
        Browser: opens $DEVICECTL_BROWSER or xdg-open on a loopback redirect, or prints the URL. \
        Shared mode refuses while another worker is signed in (exit 48); the same worker in a second app is single sign-on. \
        --token-response caches a given token endpoint response instead (admin and test path: the file is trusted).
        """)

    enum Flow: String, ExpressibleByArgument, CaseIterable {
        case deviceCode = "device-code", browser
    }

    @OptionGroup var store: StoreLocation
    @OptionGroup var caller: CallerOptions
    @Option(help: "How the worker signs in.") var flow: Flow = .deviceCode
    @Option(help: ArgumentHelp("Prefill the worker's username at the authority (login hint).", valueName: "hint")) var username: String?
    @Option(help: ArgumentHelp("Prompt: select_account, login, consent or none (browser flow).", valueName: "prompt")) var prompt: String?
    @Option(help: ArgumentHelp("Scopes, space- or comma-separated, repeatable (default: the policy's).", valueName: "scopes")) var scopes: [String] = []
    @Option(help: ArgumentHelp("Cache this token endpoint response (JSON) instead of signing in.", valueName: "file")) var tokenResponse: String?
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await runReportingErrors {
            if let tokenResponse { return try signInFromFile(tokenResponse) }
            let context = try ApplicationContext(store, app: caller.app)
            guard caller.entitlements == nil else {
                throw CLIError(exitCode: .usage, "this device is provisioned, so app entitlements come from its policy; drop --entitlements")
            }
            let promptType = try prompt.map { text in
                guard let value = Prompt(rawValue: text) else {
                    throw CLIError(exitCode: .usage, "unknown prompt \(text); use one of: \(Prompt.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                return value
            }
            let json = output.json
            let interactiveFlow: InteractiveFlow = switch flow {
            case .deviceCode:
                .deviceCode(showCode: { session in
                    if json { FileHandle.standardError.write(Data((session.message + "\n").utf8)) } else { Output.print(session.message) }
                }, progress: DeviceCodeCountdown().report)
            case .browser:
                .browser(openBrowser: SystemBrowser.open)
            }
            let parameters = InteractiveTokenParameters(scopes: parseScopes(scopes), flow: interactiveFlow, prompt: promptType, loginHint: username)
            let result = try await reportingAsyncErrors { () async throws(SharedDeviceError) in
                try await context.application.acquireToken(parameters)
            }
            if output.json {
                try Output.json(TokenJSON(result, includeSecret: false))
            } else {
                Output.print("signed in: \(AccountText.line(result.account))\nscopes: \(result.scopes.joined(separator: " "))")
            }
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

/// Prints the time left while a device-code sign-in waits: on a terminal one updating line, otherwise
/// a line every 30 seconds (to standard error, so standard output stays the result).
final class DeviceCodeCountdown: Sendable {
    private let lastPrinted = Mutex<Int?>(nil)
    private let terminal = isatty(STDERR_FILENO) == 1

    func report(_ progress: DeviceCodeProgress) {
        let line = "waiting for the sign-in… \(clock(progress.secondsLeft)) left"
        if terminal {
            FileHandle.standardError.write(Data("\r\(line)   ".utf8))
            return
        }
        let due = lastPrinted.withLock { last -> Bool in
            guard last.map({ $0 - progress.secondsLeft >= 30 }) ?? true else { return false }
            last = progress.secondsLeft
            return true
        }
        if due { FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }
}

/// `devicectl token --app ID --scopes …`: a silent token call.
struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Get an access token for an app silently (cache, then refresh token); prints scopes and expiry.",
        discussion: "The token itself only with --print-secret. Exit 50: interaction required (sign in again); 49: nobody is signed in.")

    @OptionGroup var store: StoreLocation
    @Option(help: ArgumentHelp("The calling app's id.", valueName: "id")) var app: String
    @Option(help: ArgumentHelp("Scopes of the API, space- or comma-separated, repeatable.", valueName: "scopes")) var scopes: [String]
    @Flag(help: "Skip the cached access token and redeem the refresh token.") var forceRefresh = false
    @Flag(help: "Print the access token (it is a secret).") var printSecret = false
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await runReportingErrors {
            let context = try ApplicationContext(store, app: app)
            let result = try await reportingAsyncErrors { () async throws(SharedDeviceError) in
                try await context.application.acquireTokenSilent(scopes: parseScopes(scopes), forceRefresh: forceRefresh)
            }
            if output.json { try Output.json(TokenJSON(result, includeSecret: printSecret)) }
            else { Output.print(TokenText.lines(result, printSecret: printSecret)) }
        }
    }
}

/// `devicectl call --app ID --scopes … URL`: GET a protected API with a silently obtained token.
struct Call: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call",
        abstract: "GET a protected API with `Authorization: Bearer` and a silently obtained token; prints status and JSON.",
        discussion: "URL `userinfo` means the authority's userinfo endpoint. A non-2xx answer is an error (exit 53).")

    @OptionGroup var store: StoreLocation
    @Option(help: ArgumentHelp("The calling app's id.", valueName: "id")) var app: String
    @Option(help: ArgumentHelp("Scopes of the API, space- or comma-separated, repeatable.", valueName: "scopes")) var scopes: [String]
    @Argument(help: ArgumentHelp("The API URL, or `userinfo`.", valueName: "url")) var url: String
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await runReportingErrors {
            let context = try ApplicationContext(store, app: app)
            let application = context.application
            let target: URL
            if url == "userinfo" {
                target = try await reportingIdentityErrors { () async throws(IdentityError) in try await application.identity.userInfoEndpoint() }
            } else {
                guard let parsed = URL(string: url), parsed.scheme == "https" || parsed.scheme == "http", parsed.host != nil else {
                    throw CLIError(exitCode: .usage, "\(url) is not an http(s) URL")
                }
                target = parsed
            }
            let result = try await reportingAsyncErrors { () async throws(SharedDeviceError) in
                try await application.acquireTokenSilent(scopes: parseScopes(scopes))
            }
            let response = try await reportingIdentityErrors { () async throws(IdentityError) in
                try await application.identity.get(target, accessToken: result.accessToken)
            }
            let body = Self.prettyJSON(response.body)
            guard response.isSuccess else {
                let excerpt = body.trimmingCharacters(in: .whitespacesAndNewlines).prefix(300)
                throw CLIError(exitCode: .apiError,
                    "the API at \(target.absoluteString) answered HTTP \(response.status)\(excerpt.isEmpty ? "" : ": \(excerpt)"); check the URL and that the scopes asked for (\(parseScopes(scopes).joined(separator: " "))) are the API's")
            }
            Output.print("HTTP \(response.status)")
            Output.print(body)
        }
    }

    static func prettyJSON(_ data: Data) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]),
              let pretty = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]) else {
            return String(decoding: data, as: UTF8.self)
        }
        return String(decoding: pretty, as: UTF8.self)
    }
}

extension DevicectlExit {
    /// Exit codes of the identity provider calls (documented in the README).
    static func forIdentityCode(_ code: IdentityError.Code) -> DevicectlExit {
        switch code {
        case .interactionRequired, .declinedScopes: .interactionRequired
        case .userCanceled, .accessDenied, .deviceCodeExpired: .signInNotCompleted
        case .invalidIDToken, .stateMismatch: .tokenRejected
        case .authorityUnreachable: .unavailable
        case .invalidAuthority: .configuration
        case .serverError, .invalidResponse, .unsupported: .protocolError
        default: .protocolError
        }
    }
}
