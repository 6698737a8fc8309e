import ArgumentParser
import Foundation
import KeychainStore

struct AddGenericPassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-generic-password",
        abstract: "Add an item; the secret is read from standard input (exit 45 if it exists)."
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var caller: CallerOptions
    @Option(help: ArgumentHelp("Access group (default: the app's first).", valueName: "group")) var accessGroup: String?
    @Option(help: "Service attribute.") var service: String
    @Option(help: "Account attribute.") var account: String
    @Option(help: "Label attribute.") var label: String?
    @Option(help: "Type attribute (a number, e.g. 2001).") var type: UInt32?
    @Option(help: "Generic attribute (text).") var generic: String?
    @Flag(help: "Read the secret from standard input (required: secrets never go on the command line).")
    var secretStdin = false
    @OptionGroup var output: OutputOptions

    func validate() throws {
        guard secretStdin else { throw ValidationError("pass the secret on standard input with --secret-stdin") }
    }

    func run() async throws {
        try await runReportingErrors {
            let keychain = try await KeychainAccess(caller: caller, location: store)
            let secret = try readSecretFromStandardInput()
            let item = NewItem(
                accessGroup: accessGroup,
                service: service,
                account: account,
                secret: secret,
                label: label,
                type: type,
                generic: generic.map { Data($0.utf8) }
            )
            let stored = try await keychain.add(item)
            if output.json {
                try Output.json(Output.ItemJSON(stored))
            } else {
                Output.print("added item to \(stored.accessGroup)")
            }
        }
    }
}

struct FindGenericPassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-generic-password",
        abstract: "Show the first matching item (or all with --all); exit 44 if none."
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var caller: CallerOptions
    @OptionGroup var selection: ItemSelection
    @Flag(help: "Show every match, not just the first.") var all = false
    @Flag(help: "Also show the secret (base64 in JSON).") var printSecret = false
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await runReportingErrors {
            let keychain = try await KeychainAccess(caller: caller, location: store)
            let items = try await keychain.find(selection.query, all: all)
            if output.json {
                let shown = items.map { Output.ItemJSON($0.metadata, secret: printSecret ? $0.secret : nil) }
                if all { try Output.json(shown) } else { try Output.json(shown[0]) }
            } else {
                Output.print(
                    items.map { Output.text($0.metadata, secret: printSecret ? $0.secret : nil) }.joined(
                        separator: "\n\n"
                    )
                )
            }
        }
    }
}

struct UpdateGenericPassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update-generic-password",
        abstract: "Change every matching item; a new secret is read from standard input."
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var caller: CallerOptions
    @OptionGroup var selection: ItemSelection
    @Option(help: "New service.") var setService: String?
    @Option(help: "New account.") var setAccount: String?
    @Option(help: "New label.") var setLabel: String?
    @Option(help: "New type.") var setType: UInt32?
    @Option(help: "New generic attribute (text).") var setGeneric: String?
    @Flag(help: "Read a new secret from standard input.") var secretStdin = false
    @OptionGroup var output: OutputOptions

    func validate() throws {
        guard !selection.isEmpty else {
            throw ValidationError("select items with --service, --account, --label, --type or --access-group")
        }
        guard
            secretStdin || setService != nil || setAccount != nil || setLabel != nil || setType != nil
                || setGeneric != nil
        else {
            throw ValidationError("nothing to change: pass --set-… options or --secret-stdin")
        }
    }

    func run() async throws {
        try await runReportingErrors {
            let keychain = try await KeychainAccess(caller: caller, location: store)
            let secret = secretStdin ? try readSecretFromStandardInput() : nil
            let changes = ItemChanges(
                service: setService,
                account: setAccount,
                label: setLabel,
                type: setType,
                generic: setGeneric.map { Data($0.utf8) },
                secret: secret
            )
            let count = try await keychain.update(selection.query, with: changes)
            if output.json { try Output.json(["updated": count]) } else { Output.print("updated \(count) item(s)") }
        }
    }
}

struct DeleteGenericPassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-generic-password",
        abstract: "Delete every matching item; exit 44 if none."
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var caller: CallerOptions
    @OptionGroup var selection: ItemSelection
    @OptionGroup var output: OutputOptions

    func validate() throws {
        guard !selection.isEmpty else {
            throw ValidationError("select items with --service, --account, --label, --type or --access-group")
        }
    }

    func run() async throws {
        try await runReportingErrors {
            let keychain = try await KeychainAccess(caller: caller, location: store)
            let count = try await keychain.delete(selection.query)
            if output.json { try Output.json(["deleted": count]) } else { Output.print("deleted \(count) item(s)") }
        }
    }
}

struct ListItems: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the attributes of the app's items (never secrets)."
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var caller: CallerOptions
    @OptionGroup var selection: ItemSelection
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await runReportingErrors {
            let keychain = try await KeychainAccess(caller: caller, location: store)
            let items = try await keychain.metadata(matching: selection.query)
            if output.json {
                try Output.json(items.map { Output.ItemJSON($0) })
            } else if items.isEmpty {
                Output.print("no items")
            } else {
                Output.print(items.map { Output.text($0) }.joined(separator: "\n\n"))
            }
        }
    }
}

struct VerifyStore: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Authenticate every item and group key; exit 46 naming the damaged items if any fail."
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var output: OutputOptions

    func run() throws {
        try runReportingErrors {
            let store = try store.open()
            let report = try reportingErrors { () throws(KeychainError) in try store.verify() }
            if output.json {
                try Output.json(report)
            } else {
                Output.print("checked \(report.checkedItems) item(s) in \(report.checkedGroups) access group(s)")
                for problem in report.databaseProblems { Output.print("database: \(problem)") }
                if report.damagedGroups > 0 {
                    Output.print("\(report.damagedGroups) access group key record(s) damaged")
                }
                for item in report.damagedItems { Output.print("damaged: \(item)") }
                Output.print(report.isIntact ? "store intact" : "store DAMAGED")
            }
            if !report.isIntact {
                throw CLIError(
                    exitCode: .integrityFailure,
                    "\(report.damagedItems.count) damaged item(s); delete them or restore the store from backup"
                )
            }
        }
    }
}
