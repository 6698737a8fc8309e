import ArgumentParser
import Foundation
import IdentityClient
import KeychainStore
import SharedDevice

/// `devicectl token --app ID --scopes …`: a silent token call.
struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Get an access token for an app silently (cache, then refresh token); prints scopes and expiry.",
        discussion:
            "The token itself only with --print-secret. Exit 50: interaction required (sign in again); 49: nobody is signed in."
    )

    @OptionGroup var store: StoreLocation
    @Option(help: CallerOptions.appHelp) var app: String?
    @Option(help: ArgumentHelp("Scopes of the API, space- or comma-separated, repeatable.", valueName: "scopes"))
    var scopes: [String]
    @Flag(help: "Skip the cached access token and redeem the refresh token.") var forceRefresh = false
    @OptionGroup var authority: AuthorityOption
    @Flag(help: "Print the access token (it is a secret).") var printSecret = false
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await runReportingErrors {
            let result: AuthenticationResult
            if case .broker(let broker, _) = try await BrokerRoute.choose(
                app: app,
                stateDir: store.stateDir,
                logger: store.logger
            ) {
                result = try await broker.acquireTokenSilent(
                    scopes: parseScopes(scopes),
                    forceRefresh: forceRefresh,
                    authority: authority.authority
                )
            } else {
                guard let app else { throw CLIError(exitCode: .usage, "missing --app: name the calling app") }
                let context = try ApplicationContext(store, app: app, authority: authority.authority)
                result = try await reportingAsyncErrors { () async throws(SharedDeviceError) in
                    try await context.application.acquireTokenSilent(
                        scopes: parseScopes(scopes),
                        forceRefresh: forceRefresh
                    )
                }
            }
            if output.json {
                try Output.json(TokenJSON(result, includeSecret: printSecret))
            } else {
                Output.print(TokenText.lines(result, printSecret: printSecret))
            }
        }
    }
}
