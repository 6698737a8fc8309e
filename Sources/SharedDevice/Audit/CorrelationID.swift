/// Random (version 4) UUIDs in lowercase, the correlation ids of calls and audit events, from the system's
/// generator (getrandom(2)). Foundation's `UUID()` opens and reads /dev/urandom on every call on Linux: a
/// file open per silent token call.
public enum CorrelationID {
    /// A new correlation id, e.g. `3f2a9c1b-5d4e-4f60-8a7b-1c2d3e4f5a6b`.
    public static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (generator.next(), generator.next())
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = (raw[6] & 0x0F) | 0x40  // version 4
            raw[8] = (raw[8] & 0x3F) | 0x80  // RFC 4122 variant
            let hex: [UInt8] = Array("0123456789abcdef".utf8)
            var text = [UInt8]()
            text.reserveCapacity(36)
            for (index, byte) in raw.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
                text.append(hex[Int(byte >> 4)])
                text.append(hex[Int(byte & 0x0F)])
            }
            return String(decoding: text, as: UTF8.self)
        }
    }
}
