import ArgumentParser
import DeviceLocations
import Foundation
import KeychainStore
import SharedDevice

/// Shared plumbing of the account commands: the store, the device and the acting app.
struct AccountContext {
    let store: KeychainStore
    let device: ManagedDevice
    let accounts: AccountManager

    init(_ location: StoreLocation) throws {
        store = try location.open()
        device = ManagedDevice(store: store, logger: location.logger)
        accounts = AccountManager(device: device, logger: location.logger)
    }

    /// The token request context from the device policy (exit 69 when not provisioned).
    func requestContext() throws -> TokenRequestContext {
        guard let policy = try reportingDeviceErrors({ () throws(SharedDeviceError) in try device.policy() }) else {
            throw CLIError(
                exitCode: .unavailable,
                "the device is not provisioned, so it has no sign-in authority; run `devicectl provision --policy FILE` first"
            )
        }
        return TokenRequestContext(authority: policy.authority)
    }

    /// Reads and decodes a token response file (trusted: this is the admin and test path).
    static func tokenResponse(_ path: String) throws -> TokenResponse {
        let data = try readBounded(path, limit: InputLimits.cacheDocumentBytes, what: "token response file")
        do {
            return try TokenResponse.decode(data)
        } catch {
            throw CLIError(exitCode: .badInput, "\(path) is not a usable token response: \(error)")
        }
    }
}

/// An account as `devicectl` prints it.
enum AccountText {
    static func line(_ account: DeviceAccount?) -> String {
        guard let account else { return "none" }
        var text = account.username?.forTerminal ?? "(no username)"
        if let name = account.name { text += " (\(name.forTerminal))" }
        return text
            + " home_account_id \(account.homeAccountID.forTerminal) environment \(account.environment.forTerminal)"
    }
}

struct ShowAccount: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account",
        abstract: "Show the current and previous account (MSAL's getCurrentAccount) for an app, or for the device.",
        discussion: """
            --all lists the accounts the app holds instead (MSAL's allAccounts: on a shared device the worker's, one per         B2C user flow they signed in through); --policy P only the one of user flow P (MSAL's getAccountByPolicy).
            """
    )

    @OptionGroup var store: StoreLocation
    @Option(help: ArgumentHelp("The app asking (its previous account is the one it saw last).", valueName: "id"))
    var app: String?
    @Option(help: ArgumentHelp("The app's access groups (only before provisioning).", valueName: "groups"))
    var entitlements: String?
    @Flag(help: "List the accounts the app holds (one per B2C user flow).") var all = false
    @Option(
        help: ArgumentHelp(
            "With --all: only the account of this B2C user flow (B2C_1_edit_profile).",
            valueName: "policy"
        )
    ) var policy: String?
    @Flag(
        help:
            "Keep running and print each account change deviced pushes (sign-in, sign-out, switch, idle warning), one line each (JSON Lines with --json)."
    )
    var follow = false
    @Option(
        help: ArgumentHelp(
            "The broker's socket for --follow (default: $DEVICECTL_SOCKET, else the system's).",
            valueName: "path"
        )
    )
    var socket: String?
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if follow && (all || policy != nil) {
            throw ValidationError("--follow shows the device's changes; it does not take --all or --policy")
        }
    }

    func run() async throws {
        try await runReportingErrors {
            if follow {
                // The changes deviced pushes: only a running broker has them.
                let (broker, _) = try await BrokerRoute.requiredBroker(
                    socket: socket,
                    stateDir: store.stateDir,
                    logger: store.logger
                )
                return try await AccountFollow.run(broker, json: output.json)
            }
            if all || policy != nil { return try await listAppAccounts() }
            let result: CurrentAccount
            if case .broker(let broker, _) = try await BrokerRoute.choose(
                app: app,
                stateDir: store.stateDir,
                logger: store.logger
            ) {
                result = try await broker.currentAccount()
            } else {
                let context = try AccountContext(store)
                let identity =
                    try app.map { try CallerOptions.resolve(app: $0, entitlements: entitlements, in: context.store) }
                    ?? AppIdentity.deviceAdministrator
                result = try reportingDeviceErrors { () throws(SharedDeviceError) in
                    try context.accounts.currentAccount(for: identity)
                }
            }
            if output.json {
                try Output.json(result)
            } else {
                Output.print("current: \(AccountText.line(result.current))")
                Output.print("previous: \(AccountText.line(result.previous))")
            }
        }
    }

    /// `--all` / `--policy`: the app's accounts, through the broker or in-process.
    private func listAppAccounts() async throws {
        var accounts: [DeviceAccount]
        if case .broker(let broker, _) = try await BrokerRoute.choose(
            app: app,
            stateDir: store.stateDir,
            logger: store.logger
        ) {
            accounts = try await broker.accounts()
        } else {
            let application = try ApplicationContext(store, app: app).application
            accounts = try reportingDeviceErrors { () throws(SharedDeviceError) in try application.accounts() }
        }
        if let policy { accounts = accounts.filter { $0.b2cPolicy == policy.lowercased() } }
        if output.json {
            try Output.json(accounts)
        } else {
            if accounts.isEmpty { Output.print("no accounts") }
            for account in accounts { Output.print(AccountText.line(account)) }
        }
    }
}

struct ListAccounts: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accounts",
        abstract: "List every account the device knows, with its sign-in state (no secrets)."
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var output: OutputOptions

    func run() throws {
        try runReportingErrors {
            let context = try AccountContext(store)
            let statuses = try reportingDeviceErrors { () throws(SharedDeviceError) in try context.accounts.accounts() }
            if output.json {
                try Output.json(statuses)
                return
            }
            if statuses.isEmpty { Output.print("no accounts") }
            for status in statuses {
                let state =
                    status.signedIn
                    ? "signed in" : "signed out" + (status.signOutReason.map { " (\($0.rawValue))" } ?? "")
                Output.print("\(AccountText.line(status.account)): \(state)")
            }
        }
    }
}

struct SignOut: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signout",
        abstract: "Sign the current worker out: globally in shared mode (every app's credentials), else for the app.",
        discussion: """
            Without --app an administrator signs out (globally). Reasons: user, shift-end, idle, admin. The output \
            names the broker (its socket) or the store (its state directory) the sign-out acted on. A broker named \
            with --socket or $DEVICECTL_SOCKET must answer: the sign-out never falls back to a store then (exit 69, \
            nothing done). Root without a named broker goes through the system's when it runs, else to the store.
            """
    )

    @OptionGroup var store: StoreLocation
    @Option(help: ArgumentHelp("The acting app.", valueName: "id")) var app: String?
    @Option(help: ArgumentHelp("The app's access groups (only before provisioning).", valueName: "groups"))
    var entitlements: String?
    @Option(help: ArgumentHelp("Why: user, shift-end, idle or admin (recorded in the audit log).", valueName: "reason"))
    var reason: String?
    @Flag(help: "Private mode: remove the account from every app, not just this one.") var wipeEverywhere = false
    @Option(
        help: ArgumentHelp(
            "The broker's socket (default: $DEVICECTL_SOCKET, else the system's); a named broker must answer.",
            valueName: "path"
        )
    )
    var socket: String?
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if DeviceLocations.runsAsRoot, app != nil, let socket, !socket.isEmpty {
            throw ValidationError(
                "root's --app signs out in the store directly, and --socket names a broker: drop one of them"
            )
        }
    }

    /// `--json` output: the outcome and where it happened.
    struct Result: Encodable {
        var account: DeviceAccount?
        var global: Bool
        var itemsRemoved: Int
        /// Access groups searched (in the store; the broker does not say).
        var accessGroups: Int?
        /// The broker's socket when the sign-out went through one.
        var broker: String?
        /// The store signed out in (the broker's, as it says, or the one opened).
        var stateDirectory: String?

        private enum CodingKeys: String, CodingKey {
            case account, global, itemsRemoved, accessGroups, broker, stateDirectory
        }

        /// Every key, `null` when it does not apply, so a script can read `broker` either way.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(account, forKey: .account)
            try container.encode(global, forKey: .global)
            try container.encode(itemsRemoved, forKey: .itemsRemoved)
            try container.encode(accessGroups, forKey: .accessGroups)
            try container.encode(broker, forKey: .broker)
            try container.encode(stateDirectory, forKey: .stateDirectory)
        }
    }

    func run() async throws {
        try await runReportingErrors {
            let parsedReason = try signOutReason(reason)
            let path = DeviceLocations.brokerSocket(explicit: socket)
            let named = DeviceLocations.namedBrokerSocket(explicit: socket) != nil
            let administrator = DeviceLocations.runsAsRoot && app == nil && !wipeEverywhere
            // A named broker must answer; otherwise root without --app uses the system's when it runs, and an
            // app's user its broker as every app command does.
            var broker: BrokerConnection?
            if named && !(DeviceLocations.runsAsRoot && app != nil) {
                broker = BrokerConnection(socketPath: path, logger: store.logger)
            } else if administrator {
                broker =
                    BrokerConnection.isListening(at: path)
                    ? BrokerConnection(socketPath: path, logger: store.logger) : nil
            } else if case .broker(let chosen, _) = try await BrokerRoute.choose(
                app: app,
                socket: socket,
                stateDir: store.stateDir,
                logger: store.logger
            ) {
                broker = chosen
            }
            if let broker {
                return try await signOut(
                    through: broker,
                    named: named,
                    reason: parsedReason ?? (administrator ? .admin : .user)
                )
            }
            try signOutInStore(reason: parsedReason, brokerAt: path)
        }
    }

    /// Through `broker` (the administrator's remote sign-out, or an app's as itself): the broker's store.
    /// - Parameter named: whether the user named the broker (`--socket`, `$DEVICECTL_SOCKET`).
    private func signOut(through broker: BrokerConnection, named: Bool, reason: SharedDevice.SignOutReason) async throws
    {
        let via = "the broker at \(broker.socketPath.forTerminal)"
        let caller: BrokerConnection.Caller
        do {
            caller = try await broker.caller()
        } catch let error as CLIError where error.exitCode == .unavailable {
            let direct =
                DeviceLocations.runsAsRoot
                ? " (to sign out in the store \(store.directory.path.forTerminal) itself, run without --socket and $DEVICECTL_SOCKET)"
                : ""
            throw CLIError(
                exitCode: .unavailable,
                named
                    ? "\(error.description). Nothing was signed out: a broker named with --socket or $DEVICECTL_SOCKET is never replaced by a store\(direct)"
                    : "\(error.description). Nothing was signed out"
            )
        }
        try BrokerRoute.checkStateDirectory(store.stateDir, servedBy: caller.stateDirectory, at: broker.socketPath)
        if !DeviceLocations.runsAsRoot { try BrokerRoute.refuseAnotherApp(app, own: caller.appID, uid: caller.uid) }
        let served = caller.stateDirectory.map { " (store \($0.forTerminal))" } ?? ""
        let outcome: BrokerSignOutSummary
        do {
            outcome = try await broker.signOut(reason: reason)
        } catch let error as CLIError {
            throw CLIError(exitCode: error.exitCode, "\(error.description) (through \(via)\(served))")
        }
        if output.json {
            try Output.json(
                Result(
                    account: outcome.account,
                    global: outcome.global,
                    itemsRemoved: outcome.itemsRemoved,
                    broker: broker.socketPath,
                    stateDirectory: caller.stateDirectory
                )
            )
        } else {
            let scope = outcome.global ? "from every app" : "from this app"
            Output.print(
                "signed out \(AccountText.line(outcome.account)) \(scope) through \(via)\(served): \(outcome.itemsRemoved) credential item(s) removed"
            )
        }
    }

    /// In the store itself (root, or no broker runs and none was named), saying which store, and that no
    /// broker answered at `path`.
    private func signOutInStore(reason: SharedDevice.SignOutReason?, brokerAt path: String) throws {
        let directory = store.directory.path
        let note =
            DeviceLocations.runsAsRoot && app != nil
            ? "in the store \(directory.forTerminal)"
            : "in the store \(directory.forTerminal), as no broker answers at \(path.forTerminal) (name one with --socket)"
        // A store that is not there is a mistyped --state-dir or another device's path: never created to sign out in.
        guard
            FileManager.default.fileExists(
                atPath: store.directory.appendingPathComponent(KeychainStore.databaseFileName).path
            )
        else {
            throw CLIError(
                exitCode: .unavailable,
                """
                there is no store in \(directory.forTerminal), so nobody to sign out there; nothing was created. Check \
                --state-dir, or name the device's broker with --socket
                """
            )
        }
        let outcome: AccountManager.SignOutOutcome
        do {
            let context = try AccountContext(store)
            let identity = try app.map {
                try CallerOptions.resolve(app: $0, entitlements: entitlements, in: context.store)
            }
            outcome = try reportingDeviceErrors { () throws(SharedDeviceError) in
                try context.accounts.signOut(
                    app: identity,
                    reason: reason ?? (identity == nil ? .admin : .user),
                    wipeEverywhere: wipeEverywhere,
                    actor: identity?.appID ?? Actor.current
                )
            }
        } catch let error as CLIError {
            throw CLIError(exitCode: error.exitCode, "\(error.description); looked \(note)")
        }
        if output.json {
            try Output.json(
                Result(
                    account: outcome.account,
                    global: outcome.global,
                    itemsRemoved: outcome.itemsRemoved,
                    accessGroups: outcome.accessGroups,
                    broker: nil,
                    stateDirectory: directory
                )
            )
        } else {
            let scope = outcome.global ? "from every app (\(outcome.accessGroups) access groups)" : "from this app"
            Output.print(
                "signed out \(AccountText.line(outcome.account)) \(scope) \(note): \(outcome.itemsRemoved) credential item(s) removed"
            )
        }
    }
}

/// Parses `--reason`.
func signOutReason(_ text: String?) throws -> SignOutReason? {
    guard let text else { return nil }
    guard let reason = SignOutReason(rawValue: text) else {
        throw CLIError(
            exitCode: .usage,
            "unknown reason \(text); use one of: \(SignOutReason.allCases.map(\.rawValue).joined(separator: ", "))"
        )
    }
    return reason
}

/// Runs a token-cache call, turning its error into the documented exit code.
func reportingCacheErrors<T>(_ body: () throws(TokenCacheError) -> T) throws -> T {
    do {
        return try body()
    } catch {
        throw CLIError(
            exitCode: error.storeError.map { DevicectlExit.forCode($0.code) } ?? .badInput,
            error.description
        )
    }
}

/// `devicectl cache …`: move an app's token cache in and out as MSAL unified-cache JSON.
struct CacheCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Export or import an app's token cache as MSAL unified-cache JSON.",
        subcommands: [ExportCache.self, ImportCache.self]
    )
}

struct ExportCache: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write the app's cache as unified-cache JSON (contains tokens: keep the file private)."
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var caller: CallerOptions
    @Option(help: ArgumentHelp("Write to this file (mode 0600) instead of standard output.", valueName: "file"))
    var output: String?

    func run() throws {
        try runReportingErrors {
            let context = try AccountContext(store)
            let identity = try caller.identity(in: context.store)
            let data = try reportingCacheErrors { () throws(TokenCacheError) in
                try TokenCache().exportJSON(as: identity, in: context.store)
            }
            if let output {
                guard
                    FileManager.default.createFile(
                        atPath: output,
                        contents: data,
                        attributes: [.posixPermissions: 0o600]
                    )
                else {
                    throw CLIError(exitCode: .ioError, "cannot write \(output)")
                }
            } else {
                FileHandle.standardOutput.write(data)
            }
        }
    }
}

struct ImportCache: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Load unified-cache JSON (an app migrating from MSAL) into the app's token group."
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var caller: CallerOptions
    @Argument(help: "The unified-cache JSON file.") var file: String

    func run() throws {
        try runReportingErrors {
            let context = try AccountContext(store)
            let identity = try caller.identity(in: context.store)
            let data = try readBounded(file, limit: InputLimits.cacheDocumentBytes, what: "cache document")
            let count = try reportingCacheErrors { () throws(TokenCacheError) in
                try TokenCache().importJSON(data, as: identity, in: context.store)
            }
            Output.print("imported \(count) cache entr\(count == 1 ? "y" : "ies")")
        }
    }
}
