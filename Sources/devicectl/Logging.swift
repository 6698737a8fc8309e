public import ArgumentParser
import Foundation
public import Logging

/// `--log-level LEVEL` on every command that opens the store: what devicectl and the libraries it
/// drives report on standard error. Default `$DEVICECTL_LOG_LEVEL`, else `warning`. Logs never carry a
/// token, key, secret or passphrase at any level; standard output stays the command's result.
struct LoggingOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Log to standard error from this level up: trace, debug, info, notice, warning, error or critical.",
            discussion: "Default: $DEVICECTL_LOG_LEVEL, else warning.",
            valueName: "level"
        )
    )
    var logLevel: Logger.Level?

    /// The logger every library call of this command receives, at the level `DevicectlLogging.bootstrap`
    /// already read from this option (before parsing) or the environment.
    var logger: Logger { Logger(label: DevicectlLogging.label) }
}

/// devicectl's one logging setup: a standard-error handler for the whole process, bootstrapped once at
/// start (so even a library logger reached through `Logger.current` goes there at the chosen level).
enum DevicectlLogging {
    static let label = "devicectl"

    /// `$DEVICECTL_LOG_LEVEL`, when it names a level.
    static var environmentLevel: Logger.Level? {
        ProcessInfo.processInfo.environment["DEVICECTL_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0.lowercased()) }
    }

    /// `--log-level LEVEL` or `--log-level=LEVEL` among `arguments`, read before the command is parsed so
    /// that logging is set up once, first. (A malformed value is left to the parser to report.)
    static func optionLevel(in arguments: [String]) -> Logger.Level? {
        for (index, argument) in arguments.enumerated() {
            if argument == "--log-level", index + 1 < arguments.count {
                return Logger.Level(rawValue: arguments[index + 1])
            }
            if argument.hasPrefix("--log-level=") {
                return Logger.Level(rawValue: String(argument.dropFirst("--log-level=".count)))
            }
        }
        return nil
    }

    /// Sends every logger of the process to standard error at the level in force: `--log-level`, else
    /// `$DEVICECTL_LOG_LEVEL`, else `warning`.
    static func bootstrap(arguments: [String] = Array(CommandLine.arguments.dropFirst())) {
        let level = optionLevel(in: arguments) ?? environmentLevel ?? .warning
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
