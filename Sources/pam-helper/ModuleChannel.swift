import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The helper's end of the socketpair the PAM module made (descriptor 3): length-bounded lines, one
/// message each (see Sources/PamSharedMode/include/pam_sharedmode.h). The module relays the prompts to
/// the application's PAM conversation and answers with `response TEXT` or `cancel`.
final class ModuleChannel {
    /// The longest line either side sends, its newline included (`PAM_SHAREDMODE_MAX_LINE`).
    static let maximumLine = 4096

    private let descriptor: Int32
    private var buffer: [UInt8] = []

    /// The channel on `descriptor` (the module's is 3).
    init(descriptor: Int32 = 3) { self.descriptor = descriptor }

    /// Whether the descriptor is open: the helper was started by the module, not by hand.
    var isOpen: Bool { fcntl(descriptor, F_GETFD) >= 0 }

    /// Shows `text` as PAM_TEXT_INFO.
    func info(_ text: String) { send("info", text) }

    /// Shows `text` as PAM_ERROR_MSG.
    func error(_ text: String) { send("error", text) }

    /// Tells the module a value for the session phase (`set-user`, `set-worker`, `set-correlation`).
    func set(_ name: String, _ value: String) { send("set-\(name)", value) }

    /// The call's last line.
    func result(_ code: PamCode) { send("result", code.rawValue) }

    /// Asks the user through the module; the answer's bytes (the caller wipes them), or nil when the
    /// conversation failed or the module is gone.
    func ask(_ prompt: String, echo: Bool) -> [UInt8]? {
        send(echo ? "prompt-echo-on" : "prompt-echo-off", prompt)
        guard var line = readLine() else { return nil }
        defer { Self.wipe(&line) }
        let word = Array("response ".utf8)
        guard line.starts(with: word) else { return nil }
        return Array(line[word.count...])
    }

    /// Overwrites `bytes` with zeros, then empties it.
    static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { explicit_bzero(base, raw.count) }
        }
        bytes.removeAll()
    }

    /// One line: `word TEXT`, the text's line breaks made spaces and cut to fit the line.
    private func send(_ word: String, _ text: String) {
        var line = Array(word.utf8) + [0x20]
        for byte in text.utf8 where line.count < Self.maximumLine - 1 {
            line.append(byte == 0x0A || byte == 0x0D || byte == 0 ? 0x20 : byte)
        }
        line.append(0x0A)
        var offset = 0
        while offset < line.count {
            let written = line.withUnsafeBytes { raw in
                Glibc.send(descriptor, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { break }
            offset += written
        }
    }

    /// The next line without its newline; nil at the end or on a line over the limit.
    private func readLine() -> [UInt8]? {
        var chunk = [UInt8](repeating: 0, count: Self.maximumLine)
        defer { Self.wipe(&chunk) }
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<newline])
                let rest = Array(buffer[(newline + 1)...])
                Self.wipe(&buffer)
                buffer = rest
                return line
            }
            if buffer.count >= Self.maximumLine { return nil }
            let count = chunk.withUnsafeMutableBytes { raw in
                read(descriptor, raw.baseAddress, min(raw.count, Self.maximumLine - buffer.count))
            }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return nil }
            buffer.append(contentsOf: chunk[..<count])
        }
    }
}
