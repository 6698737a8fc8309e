// Varlink enums: the Swift enum each enum `type` becomes, and the check that finds an enum value the
// interface does not declare anywhere inside a struct (which a server refuses in a call's parameters).

extension SwiftContractGenerator {
    /// An enum `type`: a case per value (`select_account` becomes `selectAccount`) and `unknown(String)`.
    func enumeration(
        _ name: String,
        documentation: [String],
        values: [String],
        into out: inout SwiftWriter
    ) throws(VarlinkIDLError) {
        let cases = values.map { (value: $0, name: caseName(camelCased($0))) }
        for value in values where camelCased(value) == "unknown" {
            throw VarlinkIDLError(
                line: 0,
                message: "\(name)'s value \(value) clashes with the case for values the contract does not declare"
            )
        }
        out.documentation(documentation)
        out.line("public enum \(name): VarlinkEnum, CustomStringConvertible {")
        out.indented { out in
            for value in cases { out.line("case \(value.name)") }
            out.line(
                "/// A value the interface did not declare when this contract was generated (a newer peer's), as sent."
            )
            out.line("case unknown(String)")
            out.line("")
            out.line("/// The values the interface declares.")
            out.wrapped(
                "public static let knownCases: [Self] = [",
                cases.map { ".\($0.name)" },
                "]",
                trailingComma: true
            )
            out.line("")
            out.line("public init(rawValue: String) {")
            out.indented { out in
                out.line("switch rawValue {")
                for value in cases { out.line("case \(literal(value.value)): self = .\(value.name)") }
                out.line("default: self = .unknown(rawValue)")
                out.line("}")
            }
            out.line("}")
            out.line("")
            out.line("public var rawValue: String {")
            out.indented { out in
                out.line("switch self {")
                for value in cases { out.line("case .\(value.name): \(literal(value.value))") }
                out.line("case .unknown(let value): value")
                out.line("}")
            }
            out.line("}")
            out.line("")
            out.line("public var isKnown: Bool {")
            out.indented { out in
                out.line("if case .unknown = self { false } else { true }")
            }
            out.line("}")
            out.line("")
            out.line("public var description: String { rawValue }")
        }
        out.line("}")
    }

    func holdsEnumeration(_ type: VarlinkInterfaceDefinition.TypeReference, _ context: Context) -> Bool {
        switch type {
        case .named(let name): context.enumerations.contains(name) || context.holdingEnumerations.contains(name)
        case .optional(let wrapped), .array(let wrapped), .map(let wrapped): holdsEnumeration(wrapped, context)
        default: false
        }
    }

    /// `firstUndeclaredEnumValue(path:)` for a struct holding enum values: the path of the first value its
    /// interface does not declare (a server refuses a call's parameters with one).
    func undeclaredEnumValueCheck(
        _ fields: [VarlinkInterfaceDefinition.Field],
        _ context: Context,
        into out: inout SwiftWriter
    ) {
        let checked = fields.filter { holdsEnumeration($0.type, context) }
        guard !checked.isEmpty else { return }
        out.line("")
        out.line("public func firstUndeclaredEnumValue(path: String) -> String? {")
        out.indented { out in
            for field in checked {
                let path = "VarlinkField.path(path, \(literal(field.name)))"
                for line in undeclaredCheck(field.type, "self.\(identifier(field.name))", path, depth: 0, context) {
                    out.line(line)
                }
            }
            out.line("return nil")
        }
        out.line("}")
    }

    /// The statements returning `path` when `value` (of `type`) holds an undeclared enum value.
    func undeclaredCheck(
        _ type: VarlinkInterfaceDefinition.TypeReference,
        _ value: String,
        _ path: String,
        depth: Int,
        _ context: Context
    ) -> [String] {
        let element = depth == 0 ? "element" : "element\(depth)"
        switch type {
        case .named(let name) where context.enumerations.contains(name):
            return ["if !\(value).isKnown { return \(path) }"]
        case .named:
            return ["if let field = \(value).firstUndeclaredEnumValue(path: \(path)) {", "    return field", "}"]
        case .optional(let wrapped):
            return ["if let \(element) = \(value) {"]
                + undeclaredCheck(wrapped, element, path, depth: depth + 1, context).map { "    " + $0 } + ["}"]
        case .array(let wrapped):
            return ["for \(element) in \(value) {"]
                + undeclaredCheck(wrapped, element, path, depth: depth + 1, context).map { "    " + $0 } + ["}"]
        case .map(let wrapped):
            return ["for \(element) in \(value).values {"]
                + undeclaredCheck(wrapped, element, path, depth: depth + 1, context).map { "    " + $0 } + ["}"]
        default:
            return []
        }
    }
}
