import ArgumentParser
import Foundation
import KeychainStore

/// Where the store is and how to unlock it.
struct StoreLocation: ParsableArguments {
    @Option(help: ArgumentHelp("State directory.",
        discussion: "Default: $DEVICECTL_STATE_DIR, else /var/lib/devicectl for root, else $XDG_STATE_HOME/devicectl (~/.local/state/devicectl).",
        valueName: "dir"))
    var stateDir: String?

    @Option(help: ArgumentHelp("Master key file (default: <state-dir>/master.key, created with the store).", valueName: "file"))
    var keyFile: String?

    @Option(help: ArgumentHelp("Unlock with the passphrase on the first line of this file instead of a key file.", valueName: "file"))
    var passphraseFile: String?

    func validate() throws {
        if keyFile != nil && passphraseFile != nil {
            throw ValidationError("--key-file and --passphrase-file exclude each other")
        }
    }

    var directory: URL { StateDirectory.resolve(explicit: stateDir) }

    /// Opens the store, turning every failure into the documented exit code.
    func open() throws -> KeychainStore {
        let source: MasterKeySource?
        if let passphraseFile {
            source = .passphrase(try Self.readPassphrase(passphraseFile))
        } else {
            source = keyFile.map { .keyFile(URL(fileURLWithPath: $0)) }
        }
        return try reportingErrors { () throws(KeychainError) in try KeychainStore(directory: directory, key: source) }
    }

    private static func readPassphrase(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw CLIError(exitCode: .ioError, "cannot read passphrase file \(path)")
        }
        let passphrase = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard !passphrase.isEmpty else { throw CLIError(exitCode: .badInput, "passphrase file \(path) has an empty first line") }
        return passphrase
    }
}

/// The calling app and its entitlements (until a device policy supplies them).
struct CallerOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The calling app's id.", valueName: "id"))
    var app: String

    @Option(help: ArgumentHelp("Comma-separated keychain access groups the app is entitled to, first one the default.", valueName: "groups"))
    var entitlements: String

    func identity() throws -> AppIdentity {
        let groups = entitlements.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        return try reportingErrors { () throws(KeychainError) in try AppIdentity(appID: app, accessGroups: groups) }
    }
}

/// Item attributes that select items.
struct ItemSelection: ParsableArguments {
    @Option(help: ArgumentHelp("Access group (default: search all of the app's groups; add uses the first).", valueName: "group"))
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
