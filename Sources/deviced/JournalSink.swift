import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Structured entries for the systemd journal through its native protocol (what `sd_journal_send(3)`
/// does, without linking libsystemd): one datagram per entry to `/run/systemd/journal/socket`, each field
/// `NAME=value\n`, or `NAME\n`, the value's length as a little-endian 64-bit number, the value and `\n`
/// when the value holds a newline. Field names are upper-case letters, digits and underscores, and do not
/// start with an underscore (journald adds the trusted `_PID`, `_UID`, … itself).
final class JournalSink: Sendable {
    /// Where journald takes native entries.
    static let defaultSocketPath = "/run/systemd/journal/socket"

    private let descriptor: Int32
    private let address: sockaddr_un

    /// A sink when journald's socket is there (the journal runs); nil otherwise.
    init?(socketPath: String = JournalSink.defaultSocketPath) {
        var status = stat()
        guard stat(socketPath, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(socketPath.utf8)
        guard path.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path)
            raw[path.count] = 0
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
        self.address = address
    }

    deinit { close(descriptor) }

    /// Sends one entry; false when journald did not take it (it stopped, or its queue is full).
    @discardableResult
    func send(_ fields: [(name: String, value: String)]) -> Bool {
        let datagram = Self.encode(fields)
        var address = self.address
        let sent = datagram.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(
                        descriptor,
                        bytes.baseAddress,
                        bytes.count,
                        Int32(MSG_NOSIGNAL),
                        $0,
                        socklen_t(MemoryLayout<sockaddr_un>.size)
                    )
                }
            }
        }
        return sent == datagram.count
    }

    /// The native protocol's encoding of `fields` (names not made of `A–Z 0–9 _`, or starting with `_`, are
    /// left out).
    static func encode(_ fields: [(name: String, value: String)]) -> Data {
        var datagram = Data()
        for (name, value) in fields where isFieldName(name) {
            let bytes = Data(value.utf8)
            datagram.append(Data(name.utf8))
            if bytes.contains(UInt8(ascii: "\n")) {
                datagram.append(UInt8(ascii: "\n"))
                withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { datagram.append(contentsOf: $0) }
                datagram.append(bytes)
            } else {
                datagram.append(UInt8(ascii: "="))
                datagram.append(bytes)
            }
            datagram.append(UInt8(ascii: "\n"))
        }
        return datagram
    }

    static func isFieldName(_ name: String) -> Bool {
        guard let first = name.utf8.first, first != UInt8(ascii: "_"), name.utf8.count <= 64 else { return false }
        return name.utf8.allSatisfy {
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                || $0 == UInt8(ascii: "_")
        }
    }
}
