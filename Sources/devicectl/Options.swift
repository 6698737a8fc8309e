import ArgumentParser
import DeviceLocations
import Foundation
import KeychainStore
import Logging
import SharedDevice

/// Where the store is and how to unlock it.
struct StoreLocation: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "State directory.",
            discussion:
                "Default: $DEVICECTL_STATE_DIR, else /var/lib/devicectl for root, else $XDG_STATE_HOME/devicectl (~/.local/state/devicectl).",
            valueName: "dir"
        )
    )
    var stateDir: String?

    @Option(
        help: ArgumentHelp(
            "Master key file (default: <state-dir>/master.key, created with the store).",
            valueName: "file"
        )
    )
    var keyFile: String?

    @Option(
        help: ArgumentHelp(
            "Unlock with the passphrase on the first line of this file instead of a key file.",
            valueName: "file"
        )
    )
    var passphraseFile: String?

    @OptionGroup var logging: LoggingOptions

    /// The logger the command hands to every library object it makes.
    var logger: Logger { logging.logger }

    func validate() throws {
        if keyFile != nil && passphraseFile != nil {
            throw ValidationError("--key-file and --passphrase-file exclude each other")
        }
    }

    var directory: URL { DeviceLocations.stateDirectory(explicit: stateDir) }

    /// Opens the store, turning every failure into the documented exit code.
    func open() throws -> KeychainStore {
        let source = try keySource()
        return try reportingErrors { () throws(KeychainError) in
            try KeychainStore(directory: directory, key: source, logger: logger)
        }
    }

    /// Opens an existing store without creating one: for commands that only make sense on a device that
    /// has a store (reading the audit log, deprovisioning), so a mistyped `--state-dir` is an error (exit 69)
    /// rather than a fresh empty store.
    func openExisting() throws -> KeychainStore {
        let database = directory.appendingPathComponent(KeychainStore.databaseFileName)
        guard FileManager.default.fileExists(atPath: database.path) else {
            throw CLIError(
                exitCode: .unavailable,
                "there is no store in \(directory.path); check --state-dir, or provision the device with `devicectl provision --policy FILE`"
            )
        }
        return try open()
    }

    /// The master key source the options name (`nil`: the key file in the state directory).
    func keySource() throws -> MasterKeySource? {
        if let passphraseFile { return .passphrase(try Self.readPassphrase(passphraseFile)) }
        return keyFile.map { .keyFile(URL(fileURLWithPath: $0)) }
    }

    private static func readPassphrase(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8)
        else {
            throw CLIError(exitCode: .ioError, "cannot read passphrase file \(path)")
        }
        let passphrase =
            text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard !passphrase.isEmpty else {
            throw CLIError(exitCode: .badInput, "passphrase file \(path) has an empty first line")
        }
        return passphrase
    }
}

/// The calling app. On a provisioned device its entitlements come from the device policy; before
/// provisioning they are given with `--entitlements`.
struct CallerOptions: ParsableArguments {
    /// `--app` of every app-facing command.
    static let appHelp = ArgumentHelp(
        "The app (an app's user: optional, its own app; root: the app to act for, on the store).",
        discussion: Devicectl.appRoute,
        valueName: "id"
    )

    @Option(help: CallerOptions.appHelp)
    var app: String?

    @Option(
        help: ArgumentHelp(
            "Comma-separated keychain access groups the app is entitled to, first one the default (only before the device is provisioned; afterwards the policy decides).",
            valueName: "groups"
        )
    )
    var entitlements: String?

    /// The app's identity: from the device policy when provisioned (an unlisted app is refused, exit 77,
    /// and the refusal audited), else from `--entitlements`.
    func identity(in store: KeychainStore) throws -> AppIdentity {
        try Self.resolve(app: requiredApp(), entitlements: entitlements, in: store)
    }

    /// `--app`, which straight access to the store needs (the broker knows the app by its uid instead).
    func requiredApp() throws -> String {
        guard let app else { throw CLIError(exitCode: .usage, "missing --app: name the calling app") }
        return app
    }

    /// `identity(in:)` for commands whose `--app` is optional.
    static func resolve(app: String, entitlements: String?, in store: KeychainStore) throws -> AppIdentity {
        let device = ManagedDevice(store: store)
        if let identity = try reportingDeviceErrors({ () throws(SharedDeviceError) in
            try device.appIdentity(app, actor: app)
        }) {
            guard entitlements == nil else {
                throw CLIError(
                    exitCode: .usage,
                    "this device is provisioned, so app entitlements come from its policy; drop --entitlements"
                )
            }
            return identity
        }
        guard let entitlements else {
            throw CLIError(
                exitCode: .usage,
                "the device is not provisioned: give the app's access groups with --entitlements, or run `devicectl provision --policy FILE` first"
            )
        }
        let groups = entitlements.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        return try reportingErrors { () throws(KeychainError) in try AppIdentity(appID: app, accessGroups: groups) }
    }

    /// Runs a keychain operation; a missing entitlement on a provisioned device is audited
    /// (`keychain.access_denied`) before it is reported.
    func reportingDenials<T>(in store: KeychainStore, _ body: () throws(KeychainError) -> T) throws -> T {
        do {
            return try body()
        } catch {
            if error.code == .missingEntitlement {
                try? ManagedDevice(store: store).recordAccessDenied(
                    appID: app ?? "",
                    actor: app ?? "",
                    reason: "missing entitlement",
                    details: ["via": Actor.current]
                )
            }
            throw CLIError(exitCode: DevicectlExit.forCode(error.code), error.description)
        }
    }
}

/// Item attributes that select items.
struct ItemSelection: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Access group (default: search all of the app's groups; add uses the first).",
            valueName: "group"
        )
    )
    var accessGroup: String?

    @Option(help: "Service attribute.")
    var service: String?

    @Option(help: "Account attribute.")
    var account: String?

    @Option(help: "Label attribute.")
    var label: String?

    @Option(help: "Type attribute (a number, e.g. 2001).")
    var type: UInt32?

    var query: ItemQuery {
        ItemQuery(accessGroup: accessGroup, service: service, account: account, label: label, type: type)
    }

    var isEmpty: Bool { accessGroup == nil && service == nil && account == nil && label == nil && type == nil }
}

/// `--json` output.
/// `--authority` of the token and sign-in commands (MSAL's per-call `parameters.authority`).
struct AuthorityOption: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Sign in or get the token at this authority instead of the policy's issuer: one of the policy's knownAuthorities (a B2C user flow such as …/tfp/{tenant}/B2C_1_edit_profile).",
            valueName: "url"
        )
    )
    var authority: String?
}

struct OutputOptions: ParsableArguments {
    @Flag(help: "Print JSON for scripts instead of text.")
    var json = false
}

/// Reads a secret from standard input; one trailing newline is dropped (so `echo secret |` works).
func readSecretFromStandardInput() throws -> Data {
    var data = FileHandle.standardInput.readDataToEndOfFile()
    if data.last == UInt8(ascii: "\n") { data.removeLast() }
    guard !data.isEmpty else { throw CLIError(exitCode: .badInput, "standard input held no secret") }
    return data
}

/// The contents of `path`, reading no more than `limit` bytes: a larger file is refused (exit 65) with
/// the limit named, an unreadable one is exit 74.
func readBounded(_ path: String, limit: Int, what: String) throws -> Data {
    let outcome: BoundedInput.Outcome
    do {
        outcome = try BoundedInput.read(contentsOf: path, limit: limit)
    } catch {
        throw CLIError(exitCode: .ioError, "cannot read \(what) \(path): \(error)")
    }
    switch outcome {
    case .complete(let data):
        return data
    case .tooLarge:
        throw CLIError(
            exitCode: .badInput,
            "\(what) \(path) is larger than \(InputLimits.describe(bytes: limit)), the limit for a \(what); nothing was changed"
        )
    }
}
