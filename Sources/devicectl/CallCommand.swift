import ArgumentParser
import Foundation
import IdentityClient
import KeychainStore
import SharedDevice

/// `devicectl call --app ID --scopes … URL`: GET a protected API with a silently obtained token.
struct Call: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call",
        abstract:
            "GET a protected API with `Authorization: Bearer` and a silently obtained token; prints status and JSON.",
        discussion: "URL `userinfo` means the authority's userinfo endpoint. A non-2xx answer is an error (exit 53)."
    )

    @OptionGroup var store: StoreLocation
    @Option(help: CallerOptions.appHelp) var app: String?
    @Option(help: ArgumentHelp("Scopes of the API, space- or comma-separated, repeatable.", valueName: "scopes"))
    var scopes: [String]
    @OptionGroup var authority: AuthorityOption
    @Argument(help: ArgumentHelp("The API URL, or `userinfo` (the authority's).", valueName: "url")) var url: String
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await runReportingErrors {
            let identity: IdentityClient
            let silentToken: () async throws -> AuthenticationResult
            let scopes = parseScopes(self.scopes)
            switch try await BrokerRoute.choose(app: app, stateDir: store.stateDir, logger: store.logger) {
            case .broker(let broker, _):
                identity = try await BrokerRoute.identityClient(
                    broker,
                    authority: authority.authority,
                    logger: store.logger
                )
                silentToken = { [authority] in
                    try await broker.acquireTokenSilent(scopes: scopes, authority: authority.authority)
                }
            case .direct:
                let application = try ApplicationContext(store, app: app, authority: authority.authority).application
                identity = application.identity
                silentToken = {
                    try await reportingAsyncErrors { () async throws(SharedDeviceError) in
                        try await application.acquireTokenSilent(scopes: scopes)
                    }
                }
            }
            // nil: the authority's userinfo endpoint.
            let apiURL: URL? = url == "userinfo" ? nil : try Self.apiURL(url)
            // The token first: it checks the call's authority (one the policy lists) before anything reaches it.
            let result = try await silentToken()
            let target =
                if let apiURL { apiURL } else {
                    try await reportingIdentityErrors { () async throws(IdentityError) in
                        try await identity.userInfoEndpoint()
                    }
                }
            let response = try await reportingIdentityErrors { () async throws(IdentityError) in
                try await identity.get(target, accessToken: result.accessToken)
            }
            let body = Self.prettyJSON(response.body)
            guard response.isSuccess else {
                let excerpt = body.trimmingCharacters(in: .whitespacesAndNewlines).prefix(300)
                throw CLIError(
                    exitCode: .apiError,
                    "the API at \(target.absoluteString) answered HTTP \(response.status)\(excerpt.isEmpty ? "" : ": \(excerpt)"); check the URL and that the scopes asked for (\(parseScopes(scopes).joined(separator: " "))) are the API's"
                )
            }
            Output.print("HTTP \(response.status)")
            Output.print(body)
        }
    }

    /// `url` as an http(s) URL, else a usage error.
    static func apiURL(_ url: String) throws -> URL {
        guard let parsed = URL(string: url), parsed.scheme == "https" || parsed.scheme == "http", parsed.host != nil
        else {
            throw CLIError(exitCode: .usage, "\(url) is not an http(s) URL")
        }
        return parsed
    }

    static func prettyJSON(_ data: Data) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]),
            let pretty = try? JSONSerialization.data(
                withJSONObject: object,
                options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            )
        else {
            return String(decoding: data, as: UTF8.self)
        }
        return String(decoding: pretty, as: UTF8.self)
    }
}
