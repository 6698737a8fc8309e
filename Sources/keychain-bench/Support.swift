import BenchSupport
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Options

/// Command-line options of `keychain-bench` (see `--help`).
struct BenchOptions {
    var items = 10_000
    var secretBytes = 2048
    var reads = 20_000
    var rounds = 40
    var fullAdds = 500
    var normalAdds = 2000
    var seed: UInt64 = 0x5EED_CAFE
    var directory: String?
    /// Which plain baseline the final ratio divides by.
    var baseline: Baseline = .unsafeRead

    enum Baseline: String, CaseIterable {
        /// `DatabaseQueue.read` on a queue configured as `KeychainStore` opens its database (its access path).
        case queue
        /// `DatabasePool.read` on the same plain file.
        case pool
        /// `DatabaseQueue.unsafeRead` + a deferred transaction on the same queue (no `PRAGMA query_only` toggling).
        case unsafeRead = "unsafe-read"
    }

    static let usage = """
        usage: keychain-bench [options]

          --items N          items in the read stores (default 10000)
          --secret-bytes N   random secret size in bytes (default 2048)
          --reads N          timed point reads per series (default 20000)
          --rounds N         rounds the reads are split into; every round runs each series on the
                             same keys, in a rotating order, so load spikes hit all series (default 40)
          --full-adds N      timed adds into a fresh store with synchronous=FULL (default 500)
          --normal-adds N    timed adds into a fresh store with synchronous=NORMAL (default 2000)
          --seed N           seed of the key sequence and secrets (default 1592642302)
          --baseline KIND    plain read the final ratio divides by: unsafe-read (DatabaseQueue.unsafeRead +
                             BEGIN DEFERRED: the store's access path; default), queue (DatabaseQueue.read)
                             or pool (DatabasePool.read)
          --dir PATH         parent of the temporary directory (default: $TMPDIR or /tmp)
          -h, --help         show this help

        """

    /// Parses `arguments` (without the program name). Exits on `--help` or a malformed option.
    static func parse(_ arguments: [String]) -> BenchOptions {
        var options = BenchOptions()
        var reader = OptionReader(tool: "keychain-bench", usage: usage, arguments: arguments)
        while let argument = reader.next() {
            switch argument {
            case "--items": options.items = reader.integer(argument)
            case "--secret-bytes": options.secretBytes = reader.integer(argument)
            case "--reads": options.reads = reader.integer(argument)
            case "--rounds": options.rounds = reader.integer(argument)
            case "--full-adds": options.fullAdds = reader.integer(argument, minimum: 0)
            case "--normal-adds": options.normalAdds = reader.integer(argument, minimum: 0)
            case "--seed":
                let text = reader.value(argument)
                guard let seed = UInt64(text) else { reader.fail("--seed must be an unsigned integer, got \"\(text)\"") }
                options.seed = seed
            case "--dir": options.directory = reader.value(argument)
            case "--baseline":
                let text = reader.value(argument)
                guard let baseline = Baseline(rawValue: text) else { reader.fail("--baseline must be queue, pool or unsafe-read, got \"\(text)\"") }
                options.baseline = baseline
            default:
                reader.fail("unknown argument \"\(argument)\"")
            }
        }
        if options.rounds > options.reads { reader.fail("--rounds (\(options.rounds)) exceeds --reads (\(options.reads))") }
        return options
    }
}

// MARK: - Randomness

/// SplitMix64: a small, fast, seedable generator so that runs use the same keys and secrets.
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

    mutating func bytes(_ count: Int) -> Data {
        var data = Data(count: count)
        data.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < count {
                var word = next()
                let chunk = min(8, count - offset)
                withUnsafeBytes(of: &word) { buffer.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: chunk) }
                offset += chunk
            }
        }
        return data
    }
}
