/// Lines of Swift, indented by four spaces a level, kept within `width` columns where the generator
/// can break them.
struct SwiftWriter {
    /// The longest line (swift-format's `lineLength` for the project).
    static let width = 120

    private(set) var text = ""
    private var depth = 0

    private var indentation: String { String(repeating: "    ", count: depth) }

    mutating func line(_ line: String) {
        text += line.isEmpty ? "\n" : indentation + line + "\n"
    }

    mutating func documentation(_ lines: [String]) {
        for line in lines { self.line(line.isEmpty ? "///" : "/// \(line)") }
    }

    /// `open`, the items separated by commas, and `close` on one line when it fits; else one item a line
    /// between them, indented (with a comma after the last one too when `trailingComma`).
    mutating func wrapped(_ open: String, _ items: [String], _ close: String, trailingComma: Bool = false) {
        let single = open + items.joined(separator: ", ") + close
        guard indentation.count + single.count > Self.width, !items.isEmpty else {
            line(single)
            return
        }
        line(open)
        indented { out in
            for (index, item) in items.enumerated() {
                out.line(item + (index < items.count - 1 || trailingComma ? "," : ""))
            }
        }
        line(close)
    }

    /// `target = ` and the expression in `lines` (see `collapsible`), as swift-format breaks them: on one
    /// line when it fits; else the expression on the next lines, indented, one that still does not fit
    /// and is conditional (`a ? nil : b`) broken before its `?` (and before its `:` when `b` has a closure).
    mutating func assignment(_ target: String, _ lines: [String]) {
        let single = lines.map { $0.drop { $0 == " " } }.joined(separator: " ")
        guard indentation.count + target.count + 3 + single.count > Self.width else {
            line("\(target) = \(single)")
            return
        }
        let conditional = lines[0].firstRange(of: " ? nil : ")
        guard lines.count == 1 || conditional != nil else {
            var lines = lines
            lines[0] = "\(target) = " + lines[0]
            collapsible(lines)
            return
        }
        line("\(target) =")
        indented { out in
            guard let conditional, out.indentation.count + single.count > Self.width else {
                out.line(single)
                return
            }
            let condition = lines[0][..<conditional.lowerBound]
            let value = lines[0][conditional.upperBound...]
            out.line(String(condition))
            if lines.count == 1 {
                out.line("? nil : " + value)
            } else {
                out.line("? nil")
                out.line(": " + value)
                for text in lines.dropFirst() { out.line(text) }
            }
        }
    }

    /// `lines` (the ones after the first indented relative to it) joined on one line when that fits, else
    /// as they are.
    mutating func collapsible(_ lines: [String]) {
        let single = lines.map { $0.drop { $0 == " " } }.joined(separator: " ")
        if indentation.count + single.count <= Self.width {
            line(single)
        } else {
            for text in lines { line(text) }
        }
    }

    mutating func indented<E: Error>(_ body: (inout SwiftWriter) throws(E) -> Void) throws(E) {
        depth += 1
        defer { depth -= 1 }
        try body(&self)
    }
}
