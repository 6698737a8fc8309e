/// A worker's command line: an optional mode word, positional arguments and `--name value` options.
/// Malformed arguments end the worker through `WorkerOutput.fail` with `invalid-arguments …`.
public struct WorkerArguments: Sendable {
    /// The first argument when the worker has modes (`mixed`, `writer`, `fill`, …), else `nil`.
    public let mode: String?
    /// The arguments that are neither the mode nor an option or its value, in order.
    public let positional: [String]
    /// `--name value` pairs, by name without the dashes.
    public let options: [String: String]

    /// Parses `arguments` (`CommandLine.arguments`, program name first).
    /// - Parameters:
    ///   - hasMode: whether the first argument names a mode.
    ///   - usage: the usage line shown when the arguments are malformed.
    public init(_ arguments: [String], hasMode: Bool, usage: String) {
        var rest = Array(arguments.dropFirst())
        if hasMode {
            guard let first = rest.first, !first.hasPrefix("--") else {
                WorkerOutput.fail("invalid-arguments usage: \(usage)")
            }
            mode = first
            rest.removeFirst()
        } else {
            mode = nil
        }
        var positional: [String] = []
        var options: [String: String] = [:]
        var index = 0
        while index < rest.count {
            let argument = rest[index]
            if argument.hasPrefix("--") {
                guard index + 1 < rest.count else {
                    WorkerOutput.fail("invalid-arguments \(argument) needs a value; usage: \(usage)")
                }
                options[String(argument.dropFirst(2))] = rest[index + 1]
                index += 2
            } else {
                positional.append(argument)
                index += 1
            }
        }
        self.positional = positional
        self.options = options
    }

    /// The value of `--name`; the worker fails if it is missing.
    public func string(_ name: String) -> String {
        guard let value = options[name] else { WorkerOutput.fail("invalid-arguments missing --\(name)") }
        return value
    }

    /// The integer value of `--name`, or `fallback` when it is absent (the worker fails if there is none).
    public func int(_ name: String, default fallback: Int? = nil) -> Int {
        guard let text = options[name] else {
            guard let fallback else { WorkerOutput.fail("invalid-arguments missing --\(name)") }
            return fallback
        }
        guard let value = Int(text) else { WorkerOutput.fail("invalid-arguments --\(name) is not an integer: \(text)") }
        return value
    }

    /// The number value of `--name`, or `fallback` when it is absent.
    public func double(_ name: String, default fallback: Double) -> Double {
        guard let text = options[name] else { return fallback }
        guard let value = Double(text) else {
            WorkerOutput.fail("invalid-arguments --\(name) is not a number: \(text)")
        }
        return value
    }

    /// Positional argument `index`, called `name` in messages; the worker fails if it is missing.
    public func positional(_ index: Int, _ name: String) -> String {
        guard index < positional.count else { WorkerOutput.fail("invalid-arguments missing \(name)") }
        return positional[index]
    }

    /// Positional argument `index` as an integer.
    public func positionalInt(_ index: Int, _ name: String) -> Int {
        guard let value = Int(positional(index, name)) else {
            WorkerOutput.fail("invalid-arguments \(name) is not an integer")
        }
        return value
    }
}
