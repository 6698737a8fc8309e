/// A varlink interface definition as its `.varlink` file declares it (the varlink IDL: `interface`,
/// `type`, `method`, `error`, and the comments before each, which become documentation).
///
/// One comment line is no documentation but an annotation: `# @streams` in a method's comment marks a
/// method whose replies stream, which must be called with `more` (varlink's IDL has no syntax for it).
public struct VarlinkInterfaceDefinition: Sendable, Hashable {
    /// The reverse-domain name, e.g. `org.example.Service1`.
    public var name: String
    /// The comment lines directly before `interface`.
    public var documentation: [String]
    /// Types, methods and errors, in the file's order.
    public var members: [Member]

    /// A declaration of the interface.
    public enum Member: Sendable, Hashable {
        case type(name: String, documentation: [String], definition: TypeDefinition)
        /// `streams`: the method's comment says `@streams` (it is called with `more` and replies until the last).
        case method(name: String, documentation: [String], parameters: [Field], reply: [Field], streams: Bool)
        case error(name: String, documentation: [String], fields: [Field])
    }

    /// What a `type` declares: a struct of fields, or an enum of names.
    public enum TypeDefinition: Sendable, Hashable {
        case structure([Field])
        case enumeration([String])
    }

    /// A field of a struct, the parameters or reply of a method, or an error.
    public struct Field: Sendable, Hashable {
        public var name: String
        public var type: TypeReference
        /// The comment lines directly before the field.
        public var documentation: [String]
    }

    /// A field's type.
    public indirect enum TypeReference: Sendable, Hashable {
        case string, int, float, bool, object
        /// A `type` of the interface.
        case named(String)
        /// `?T`: null or absent allowed.
        case optional(TypeReference)
        /// `[]T`.
        case array(TypeReference)
        /// `[string]T`.
        case map(TypeReference)
        /// `(a, b, c)` written in place.
        case inlineEnumeration([String])
        /// `(name: T, …)` written in place.
        case inlineStructure([Field])
    }
}

/// A `.varlink` file that does not follow the grammar: where and what.
public struct VarlinkIDLError: Error, Sendable, CustomStringConvertible {
    /// The 1-based line.
    public let line: Int
    /// What was expected.
    public let message: String

    public var description: String { "line \(line): \(message)" }
}

extension VarlinkInterfaceDefinition {
    /// Parses the text of a `.varlink` file.
    /// - Throws: `VarlinkIDLError` with the line and what was expected.
    public init(parsing text: String) throws(VarlinkIDLError) {
        var parser = Parser(tokens: try Tokenizer.tokens(of: text))
        self = try parser.interface()
    }
}

private struct Token: Equatable {
    enum Kind: Equatable { case word, symbol, end }
    var kind: Kind
    var text: String
    var line: Int
    /// The comment lines directly before the token (no blank line in between).
    var documentation: [String]
}

private enum Tokenizer {
    static func tokens(of text: String) throws(VarlinkIDLError) -> [Token] {
        var tokens: [Token] = []
        var comments: [String] = []
        var line = 1
        var index = text.unicodeScalars.startIndex
        let scalars = text.unicodeScalars
        var blankLineSinceComment = false
        var lineHadContent = false
        while index < scalars.endIndex {
            let scalar = scalars[index]
            if scalar == "\n" {
                if !lineHadContent && !comments.isEmpty { blankLineSinceComment = true }
                line += 1
                lineHadContent = false
                index = scalars.index(after: index)
            } else if scalar == " " || scalar == "\t" || scalar == "\r" {
                index = scalars.index(after: index)
            } else if scalar == "#" {
                var end = index
                while end < scalars.endIndex, scalars[end] != "\n" { end = scalars.index(after: end) }
                var comment = String(scalars[scalars.index(after: index)..<end])
                if comment.hasPrefix(" ") { comment.removeFirst() }
                if blankLineSinceComment { comments = [] }
                blankLineSinceComment = false
                comments.append(comment)
                lineHadContent = true
                index = end
            } else {
                lineHadContent = true
                let documentation = blankLineSinceComment ? [] : comments
                comments = []
                blankLineSinceComment = false
                if isWordStart(scalar) {
                    var end = scalars.index(after: index)
                    while end < scalars.endIndex, isWordPart(scalars[end]) { end = scalars.index(after: end) }
                    tokens.append(
                        Token(kind: .word, text: String(scalars[index..<end]), line: line, documentation: documentation)
                    )
                    index = end
                } else if scalar == "-" {
                    let next = scalars.index(after: index)
                    guard next < scalars.endIndex, scalars[next] == ">" else {
                        throw VarlinkIDLError(line: line, message: "expected -> ")
                    }
                    tokens.append(Token(kind: .symbol, text: "->", line: line, documentation: documentation))
                    index = scalars.index(after: next)
                } else if "(),:?[]".unicodeScalars.contains(scalar) {
                    tokens.append(Token(kind: .symbol, text: String(scalar), line: line, documentation: documentation))
                    index = scalars.index(after: index)
                } else {
                    throw VarlinkIDLError(line: line, message: "unexpected character \"\(scalar)\"")
                }
            }
        }
        tokens.append(Token(kind: .end, text: "", line: line, documentation: []))
        return tokens
    }

    static func isWordStart(_ scalar: Unicode.Scalar) -> Bool {
        scalar.isASCII && (("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_")
    }

    static func isWordPart(_ scalar: Unicode.Scalar) -> Bool {
        isWordStart(scalar) || ("0"..."9").contains(scalar) || scalar == "." || scalar == "-"
    }
}

private struct Parser {
    /// The comment line that marks a method whose replies stream.
    static let streamsAnnotation = "@streams"

    let tokens: [Token]
    var position = 0

    init(tokens: [Token]) { self.tokens = tokens }

    var current: Token { tokens[position] }

    mutating func advance() -> Token {
        defer { position += 1 }
        return tokens[position]
    }

    mutating func expect(_ symbol: String) throws(VarlinkIDLError) {
        guard current.kind == .symbol, current.text == symbol else {
            throw VarlinkIDLError(line: current.line, message: "expected \"\(symbol)\", found \"\(current.text)\"")
        }
        position += 1
    }

    mutating func word(_ what: String) throws(VarlinkIDLError) -> Token {
        guard current.kind == .word else {
            throw VarlinkIDLError(line: current.line, message: "expected \(what), found \"\(current.text)\"")
        }
        return advance()
    }

    func isSymbol(_ symbol: String, at offset: Int = 0) -> Bool {
        let token = tokens[min(position + offset, tokens.count - 1)]
        return token.kind == .symbol && token.text == symbol
    }

    mutating func interface() throws(VarlinkIDLError) -> VarlinkInterfaceDefinition {
        let keyword = try word("interface")
        guard keyword.text == "interface" else {
            throw VarlinkIDLError(line: keyword.line, message: "expected interface")
        }
        let name = try word("an interface name").text
        var members: [VarlinkInterfaceDefinition.Member] = []
        while current.kind != .end {
            let keyword = try word("type, method or error")
            let memberName = try word("a name").text
            switch keyword.text {
            case "type":
                let definition: VarlinkInterfaceDefinition.TypeDefinition
                switch try group() {
                case .inlineEnumeration(let names): definition = .enumeration(names)
                case .inlineStructure(let fields): definition = .structure(fields)
                default: throw VarlinkIDLError(line: keyword.line, message: "expected a struct or an enum")
                }
                members.append(.type(name: memberName, documentation: keyword.documentation, definition: definition))
            case "method":
                let parameters = try structure()
                try expect("->")
                let reply = try structure()
                let documentation = keyword.documentation.filter { $0 != Self.streamsAnnotation }
                members.append(
                    .method(
                        name: memberName,
                        documentation: documentation,
                        parameters: parameters,
                        reply: reply,
                        streams: documentation.count != keyword.documentation.count
                    )
                )
            case "error":
                members.append(.error(name: memberName, documentation: keyword.documentation, fields: try structure()))
            default:
                throw VarlinkIDLError(
                    line: keyword.line,
                    message: "expected type, method or error, found \"\(keyword.text)\""
                )
            }
        }
        return VarlinkInterfaceDefinition(name: name, documentation: keyword.documentation, members: members)
    }

    mutating func structure() throws(VarlinkIDLError) -> [VarlinkInterfaceDefinition.Field] {
        let line = current.line
        switch try group() {
        case .inlineStructure(let fields): return fields
        case .inlineEnumeration(let names) where names.isEmpty: return []
        default: throw VarlinkIDLError(line: line, message: "expected fields (name: type, …)")
        }
    }

    /// `( … )`: an enum when the first entry has no `:`.
    mutating func group() throws(VarlinkIDLError) -> VarlinkInterfaceDefinition.TypeReference {
        try expect("(")
        if isSymbol(")") {
            position += 1
            return .inlineEnumeration([])
        }
        if isSymbol(":", at: 1) {
            var fields: [VarlinkInterfaceDefinition.Field] = []
            repeat {
                if !fields.isEmpty { try expect(",") }
                let name = try word("a field name")
                try expect(":")
                fields.append(
                    VarlinkInterfaceDefinition.Field(
                        name: name.text,
                        type: try type(),
                        documentation: name.documentation
                    )
                )
            } while isSymbol(",")
            try expect(")")
            return .inlineStructure(fields)
        }
        var names: [String] = []
        repeat {
            if !names.isEmpty { try expect(",") }
            names.append(try word("an enum value").text)
        } while isSymbol(",")
        try expect(")")
        return .inlineEnumeration(names)
    }

    mutating func type() throws(VarlinkIDLError) -> VarlinkInterfaceDefinition.TypeReference {
        if isSymbol("?") {
            position += 1
            return .optional(try type())
        }
        if isSymbol("[") {
            position += 1
            if isSymbol("]") {
                position += 1
                return .array(try type())
            }
            let key = try word("string")
            guard key.text == "string" else {
                throw VarlinkIDLError(line: key.line, message: "a map's key must be string")
            }
            try expect("]")
            return .map(try type())
        }
        if isSymbol("(") { return try group() }
        let name = try word("a type")
        switch name.text {
        case "string": return .string
        case "int": return .int
        case "float": return .float
        case "bool": return .bool
        case "object": return .object
        default: return .named(name.text)
        }
    }
}
