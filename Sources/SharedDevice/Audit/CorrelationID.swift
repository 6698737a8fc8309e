import KeychainStore
import Synchronization

/// Random (version 4) UUIDs in lowercase, the correlation ids of calls and audit events, from the system's
/// generator (getrandom(2)). Foundation's `UUID()` opens and reads /dev/urandom on every call on Linux, and the
/// standard library's generator makes a system call per 8 bytes: the ids are cut from a pool of random bytes
/// filled 4 KiB at a time (256 ids), so a silent token makes no system call for its id.
public enum CorrelationID {
    /// A new correlation id, e.g. `3f2a9c1b-5d4e-4f60-8a7b-1c2d3e4f5a6b`.
    public static func make() -> String {
        var bytes = pool.withLock { $0.next() }
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = (raw[6] & 0x0F) | 0x40  // version 4
            raw[8] = (raw[8] & 0x3F) | 0x80  // RFC 4122 variant
            return String(unsafeUninitializedCapacity: 36) { text in
                var count = 0
                for (index, byte) in raw.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        text[count] = UInt8(ascii: "-")
                        count += 1
                    }
                    text[count] = hexDigits[Int(byte >> 4)]
                    text[count + 1] = hexDigits[Int(byte & 0x0F)]
                    count += 2
                }
                return count
            }
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    private static let pool = Mutex(RandomPool())

    /// Random bytes drawn 16 at a time, each byte handed out once; refilled when used up.
    private struct RandomPool {
        private var bytes = [UInt8](repeating: 0, count: 4_096)
        private var offset = 4_096

        mutating func next() -> (UInt64, UInt64) {
            if offset + 16 > bytes.count {
                bytes.withUnsafeMutableBytes { RandomBytes.fill($0) }
                offset = 0
            }
            defer { offset += 16 }
            return bytes.withUnsafeBytes { raw in
                (
                    raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self),
                    raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)
                )
            }
        }
    }
}
