// The C baselines (SQLiteBaselines) as the store benchmark uses them.
import BenchmarkFixtures
import Foundation
import SQLiteBaselines

/// A table of secrets read and written through the sqlite3 C API with prepared statements: the system
/// SQLite (the floor of one indexed lookup) or SQLCipher (page-encrypted). Reads copy the secret into a
/// buffer kept for the table's lifetime (no allocation).
final class CTable {
    enum Engine: String {
        case plain = "SQLite from C"
        case sqlcipher = "SQLCipher"
    }

    private let table: OpaquePointer
    private var buffer = [UInt8](repeating: 0, count: 4096)

    init(_ engine: Engine, path: String) throws {
        var error = [CChar](repeating: 0, count: 512)
        let opened: OpaquePointer?
        switch engine {
        case .plain:
            opened = baseline_open_plain(path, &error, error.count)
        case .sqlcipher:
            var generator = SplitMix64(seed: 0x5C1C)
            var key = [UInt8](generator.bytes(32))
            opened = baseline_open_sqlcipher(path, &key, &error, error.count)
        }
        guard let opened else {
            throw BenchmarkFailure(
                "\(engine.rawValue): \(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))"
            )
        }
        table = opened
    }

    deinit { baseline_close(table) }

    /// Inserts one row in its own transaction.
    func insert(group: String, service: String, account: String, secret: Data) throws {
        let status = secret.withUnsafeBytes {
            baseline_insert(table, group, service, account, $0.baseAddress, $0.count)
        }
        guard status == 0 else { throw BenchmarkFailure("insert \(service)/\(account): SQLite status \(status)") }
    }

    /// Reads one row's secret (into the table's buffer); returns its size.
    @discardableResult
    func read(group: String, service: String, account: String) throws -> Int {
        let size = buffer.withUnsafeMutableBytes {
            baseline_read(table, group, service, account, $0.baseAddress, $0.count)
        }
        guard size >= 0 else { throw BenchmarkFailure("read \(service)/\(account) failed") }
        return size
    }

    /// The last secret read, as `Data` (for checking contents, not in timed code).
    func lastSecret(size: Int) -> Data { Data(buffer[0..<size]) }
}
