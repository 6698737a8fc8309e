import ArgumentParser
import Logging

/// The keychain's read commands, parsed without ArgumentParser's reflection when their arguments are plain.
///
/// `devicectl keychain find-generic-password` and `devicectl keychain list` are what scripts and a kiosk's
/// shell run again and again, and as whole processes they are mostly start-up: ArgumentParser's parse
/// (which builds the command tree and every argument set through reflection, each new type costing the
/// Swift runtime a scan of all the binary's protocol conformances) was a third of a point read. When the
/// arguments are plain, this fills the same command types ArgumentParser would, runs the same `validate()`
/// methods, and hands the command back. Plain means: the command named exactly (`keychain` then the
/// subcommand), then only that command's long options, each at most once, as `--name value` or
/// `--name=value` with a value that does not start with `-`, and its flags without a value. Anything else —
/// help, an unknown, repeated or malformed option, a number or log level that does not parse, a failed
/// validation — returns nil and goes to ArgumentParser, so its messages and exit codes stay the only ones.
/// `DEVICECTL_FULL_PARSE=1` always takes ArgumentParser's way (the tests run both and compare).
enum PlainArgumentsParser {
    /// The environment variable that turns the plain parse off.
    static let fullParseVariable = "DEVICECTL_FULL_PARSE"

    /// The command `arguments` (without the program name) ask for, or nil to let ArgumentParser parse.
    static func command(_ arguments: [String], environment: [String: String]) -> sending (any ParsableCommand)? {
        guard environment[fullParseVariable] != "1", arguments.count >= 2, arguments[0] == "keychain" else {
            return nil
        }
        let options = arguments.dropFirst(2)
        let command: (any ParsableCommand)?
        switch arguments[1] {
        case "find-generic-password": command = FindGenericPassword(plain: options)
        case "list": command = ListItems(plain: options)
        default: command = nil
        }
        if command != nil { Logger(label: DevicectlLogging.label).trace("arguments parsed without ArgumentParser") }
        return command
    }
}

/// A command's plain arguments: the values of its long options and the flags that were given.
struct PlainArguments {
    private var values: [String: String] = [:]
    private var flags: Set<String> = []

    /// `arguments` split by the option names `options` (which take a value) and `flags` (which do not);
    /// nil unless every argument is one of them, given once, in a plain form.
    init?(_ arguments: ArraySlice<String>, options: Set<String>, flags: Set<String>) {
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--") else { return nil }
            let body = argument.dropFirst(2)
            if let equals = body.firstIndex(of: "=") {
                let name = String(body[..<equals])
                guard options.contains(name), !values.keys.contains(name) else { return nil }
                values[name] = String(body[body.index(after: equals)...])
                continue
            }
            let name = String(body)
            if options.contains(name) {
                guard !values.keys.contains(name), index < arguments.endIndex, !arguments[index].hasPrefix("-") else {
                    return nil
                }
                values[name] = arguments[index]
                index += 1
            } else if flags.contains(name) {
                guard self.flags.insert(name).inserted else { return nil }
            } else {
                return nil
            }
        }
    }

    /// The value of `--name`, if given.
    func value(_ name: String) -> String? { values[name] }

    /// Whether `--name` was given.
    func flag(_ name: String) -> Bool { flags.contains(name) }
}

// Each option group fills its own options, under the names ArgumentParser derives from the property names.

extension LoggingOptions {
    static let plainOptions: Set<String> = ["log-level"]

    init?(plain: PlainArguments) {
        self.init()
        if let text = plain.value("log-level") {
            guard let level = Logger.Level(argument: text) else { return nil }
            logLevel = level
        } else {
            logLevel = nil
        }
    }
}

extension StoreLocation {
    static let plainOptions = Set(["state-dir", "key-file", "passphrase-file"]).union(LoggingOptions.plainOptions)

    init?(plain: PlainArguments) {
        self.init()
        stateDir = plain.value("state-dir")
        keyFile = plain.value("key-file")
        passphraseFile = plain.value("passphrase-file")
        guard let logging = LoggingOptions(plain: plain) else { return nil }
        self.logging = logging
    }
}

extension CallerOptions {
    static let plainOptions: Set<String> = ["app", "entitlements"]

    init(plain: PlainArguments) {
        self.init()
        app = plain.value("app")
        entitlements = plain.value("entitlements")
    }
}

extension ItemSelection {
    static let plainOptions: Set<String> = ["access-group", "service", "account", "label", "type"]

    init?(plain: PlainArguments) {
        self.init()
        accessGroup = plain.value("access-group")
        service = plain.value("service")
        account = plain.value("account")
        label = plain.value("label")
        if let text = plain.value("type") {
            guard let type = UInt32(argument: text) else { return nil }
            self.type = type
        } else {
            type = nil
        }
    }
}

extension OutputOptions {
    static let plainFlags: Set<String> = ["json"]

    init(plain: PlainArguments) {
        self.init()
        json = plain.flag("json")
    }
}

/// The option groups the keychain read commands share, filled from plain arguments and validated in
/// ArgumentParser's order (the nested group first); the command's own `validate()` comes after.
private struct ReadCommandGroups {
    static let options = StoreLocation.plainOptions.union(CallerOptions.plainOptions).union(ItemSelection.plainOptions)
    static let flags = OutputOptions.plainFlags

    var store: StoreLocation
    var caller: CallerOptions
    var selection: ItemSelection
    var output: OutputOptions

    init?(_ plain: PlainArguments) {
        guard let store = StoreLocation(plain: plain), let selection = ItemSelection(plain: plain) else { return nil }
        self.store = store
        self.selection = selection
        caller = CallerOptions(plain: plain)
        output = OutputOptions(plain: plain)
        do {
            try self.store.logging.validate()
            try self.store.validate()
            try caller.validate()
            try self.selection.validate()
            try output.validate()
        } catch {
            return nil
        }
    }
}

extension FindGenericPassword {
    init?(plain arguments: ArraySlice<String>) {
        guard
            let plain = PlainArguments(
                arguments,
                options: ReadCommandGroups.options,
                flags: ReadCommandGroups.flags.union(["all", "print-secret"])
            ),
            let groups = ReadCommandGroups(plain)
        else { return nil }
        self.init()
        (store, caller, selection, output) = (groups.store, groups.caller, groups.selection, groups.output)
        all = plain.flag("all")
        printSecret = plain.flag("print-secret")
        guard (try? validate()) != nil else { return nil }
    }
}

extension ListItems {
    init?(plain arguments: ArraySlice<String>) {
        guard let plain = PlainArguments(arguments, options: ReadCommandGroups.options, flags: ReadCommandGroups.flags),
            let groups = ReadCommandGroups(plain)
        else { return nil }
        self.init()
        (store, caller, selection, output) = (groups.store, groups.caller, groups.selection, groups.output)
        guard (try? validate()) != nil else { return nil }
    }
}
