/// Writes the generated regions of a hand-written Markdown page about an interface: the declarations of
/// its methods, types and errors as the interface file states them, so that the page's prose stays
/// hand-written while its signatures cannot drift from the file.
///
/// A region is a line `<!-- generated: KIND NAME -->` and a line `<!-- end generated -->`; whatever is
/// between them is replaced by a fenced `varlink` block holding the declaration. `KIND` is `method`,
/// `type` or `error`; `<!-- generated: errors -->` holds every error of the interface, in the file's order.
/// Everything outside the regions is kept byte for byte.
public struct MarkdownSignatureGenerator: Sendable {
    /// The interface whose declarations the regions hold.
    public let interface: VarlinkInterfaceDefinition
    /// The longest line a declaration is written on before its fields wrap (the fence aside).
    public let width: Int

    /// A generator of `interface`'s declarations, wrapped at `width` columns.
    public init(interface: VarlinkInterfaceDefinition, width: Int = 110) {
        self.interface = interface
        self.width = width
    }

    /// The line that opens a region holding `member` (`method GetCaller`, `type Account`, `errors`).
    public static func openingMarker(_ member: String) -> String { "<!-- generated: \(member) -->" }

    /// The line that closes every region.
    public static let closingMarker = "<!-- end generated -->"

    /// The members named by the page's regions, in the page's order (`method GetCaller`, `errors`, …).
    public static func regions(in page: String) -> [String] {
        page.split(separator: "\n", omittingEmptySubsequences: false).compactMap { member(openedBy: String($0)) }
    }

    /// `page` with every region rewritten from the interface.
    /// - Throws: `VarlinkIDLError` (with the page's line) for a region that names no member of the
    ///   interface, or that is not closed.
    public func rewrite(_ page: String) throws(VarlinkIDLError) -> String {
        var output: [Substring] = []
        var open: (member: String, line: Int)?
        for (index, line) in page.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if let region = open {
                guard line.trimmingSpaces == Self.closingMarker else { continue }
                output.append(contentsOf: try block(region.member, line: region.line).map { Substring($0) })
                output.append(line)
                open = nil
            } else {
                output.append(line)
                if let member = Self.member(openedBy: String(line)) {
                    open = (member, index + 1)
                } else if line.trimmingSpaces == Self.closingMarker {
                    throw VarlinkIDLError(line: index + 1, message: "\(Self.closingMarker) without a region open")
                }
            }
        }
        if let open {
            throw VarlinkIDLError(
                line: open.line,
                message: "the region \"\(open.member)\" is not closed by \(Self.closingMarker)"
            )
        }
        return output.joined(separator: "\n")
    }

    /// The declaration of `member` (`method Name`, `type Name`, `error Name`, `errors`) as the IDL writes it.
    public func declaration(of member: String) -> String? {
        if member == "errors" {
            let errors = interface.members.compactMap { member -> String? in
                guard case .error(let name, _, let fields) = member else { return nil }
                return wrapped("error \(name) ", fields, suffix: "")
            }
            return errors.isEmpty ? nil : errors.joined(separator: "\n")
        }
        let words = member.split(separator: " ")
        guard words.count == 2 else { return nil }
        for declared in interface.members {
            switch (words[0], declared) {
            case ("method", .method(let name, _, let parameters, let reply, _)) where name == words[1]:
                let parametersText = wrapped("method \(name)(", parameters, suffix: ") -> (", parenthesized: false)
                let lastLine = parametersText.split(separator: "\n").last.map(String.init) ?? parametersText
                if lastLine.count + list(reply).count + 1 <= width {
                    return parametersText + list(reply) + ")"
                }
                return parametersText + "\n"
                    + reply.map { "  \($0.name): \(typeName($0.type))" }.joined(separator: ",\n") + "\n)"
            case ("type", .type(let name, _, .structure(let fields))) where name == words[1]:
                return wrapped("type \(name) ", fields, suffix: "")
            case ("type", .type(let name, _, .enumeration(let values))) where name == words[1]:
                return "type \(name) (\(values.joined(separator: ", ")))"
            case ("error", .error(let name, _, let fields)) where name == words[1]:
                return wrapped("error \(name) ", fields, suffix: "")
            default:
                continue
            }
        }
        return nil
    }

    private func block(_ member: String, line: Int) throws(VarlinkIDLError) -> [String] {
        guard let declaration = declaration(of: member) else {
            throw VarlinkIDLError(line: line, message: "\(interface.name) has no \(member)")
        }
        return ["```varlink", declaration, "```"]
    }

    private static func member(openedBy line: String) -> String? {
        let text = line.trimmingSpaces
        let prefix = "<!-- generated: "
        let suffix = " -->"
        guard text.hasPrefix(prefix), text.hasSuffix(suffix), text.count > prefix.count + suffix.count else {
            return nil
        }
        return String(text.dropFirst(prefix.count).dropLast(suffix.count)).trimmingSpaces
    }

    private func list(_ fields: [VarlinkInterfaceDefinition.Field]) -> String {
        fields.map { "\($0.name): \(typeName($0.type))" }.joined(separator: ", ")
    }

    /// `head` and the fields in parentheses (or, with `parenthesized` false, after `head`, which opens
    /// them, and before `suffix`), on one line when it fits in `width`, else wrapped with the
    /// continuation lines aligned after the opening parenthesis.
    private func wrapped(
        _ head: String,
        _ fields: [VarlinkInterfaceDefinition.Field],
        suffix: String,
        parenthesized: Bool = true
    ) -> String {
        let opening = parenthesized ? head + "(" : head
        let closing = parenthesized ? ")" + suffix : suffix
        let items = fields.map { "\($0.name): \(typeName($0.type))" }
        let single = opening + items.joined(separator: ", ") + closing
        guard single.count > width, items.count > 1 else { return single }
        let indent = String(repeating: " ", count: opening.count)
        var lines: [String] = []
        var current = opening
        for (index, item) in items.enumerated() {
            let piece = item + (index == items.count - 1 ? closing : ",")
            if index == 0 {
                current += piece
            } else if current.count + 1 + piece.count > width {
                lines.append(current)
                current = indent + piece
            } else {
                current += " " + piece
            }
        }
        lines.append(current)
        return lines.joined(separator: "\n")
    }

    /// A type as the IDL writes it.
    private func typeName(_ type: VarlinkInterfaceDefinition.TypeReference) -> String {
        switch type {
        case .string: "string"
        case .int: "int"
        case .float: "float"
        case .bool: "bool"
        case .object: "object"
        case .named(let name): name
        case .optional(let wrapped): "?" + typeName(wrapped)
        case .array(let element): "[]" + typeName(element)
        case .map(let value): "[string]" + typeName(value)
        case .inlineEnumeration(let values): "(" + values.joined(separator: ", ") + ")"
        case .inlineStructure(let fields): "(" + list(fields) + ")"
        }
    }
}

extension StringProtocol {
    fileprivate var trimmingSpaces: String {
        var text = Substring(self)
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" || text.last == "\r" { text.removeLast() }
        return String(text)
    }
}
