import Foundation

/// SplitMix64: a small seedable generator, so that every run reads the same keys and stores the same secrets.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// `count` random bytes.
    mutating func bytes(_ count: Int) -> Data {
        var data = Data(capacity: count + 8)
        while data.count < count {
            withUnsafeBytes(of: next()) { data.append(contentsOf: $0.prefix(count - data.count)) }
        }
        return data
    }
}
