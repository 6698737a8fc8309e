/// Values in devicectl's text output, made safe for a terminal. A label, an account name, an executable
/// path or an audit detail comes from apps, users or the identity provider: printed raw, a newline would
/// forge a line of its own (a fake `#999 … account.signed_out` audit line) and an escape sequence would
/// recolour or rewrite the screen. So every control character is shown as an escape instead: `\n`, `\r`,
/// `\t`, `\e` (ESC), `\\` (a backslash itself, so escapes stay unambiguous), and `\u{XX}` for the other C0
/// and C1 controls, DEL, the line and paragraph separators and the bidirectional overrides and isolates
/// (which reorder what the eye reads). JSON output is not touched: it is exact, and JSON escapes what it must.
enum TerminalText {
    static func escaped(_ value: String) -> String {
        guard value.unicodeScalars.contains(where: needsEscape) else { return value }
        var result = ""
        result.unicodeScalars.reserveCapacity(value.unicodeScalars.count + 8)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case "\u{1B}": result += "\\e"
            case "\\": result += "\\\\"
            case _ where needsEscape(scalar): result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x5C: true  // a backslash, so that escapes cannot be imitated
        case 0x2028, 0x2029: true  // line and paragraph separators
        case 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: true  // bidirectional controls
        default: false
        }
    }
}

extension String {
    /// The value escaped for devicectl's text output (`TerminalText.escaped`).
    var forTerminal: String { TerminalText.escaped(self) }
}
