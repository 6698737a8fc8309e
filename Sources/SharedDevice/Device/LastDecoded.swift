import Synchronization

/// The last value decoded and the key it was decoded for, so that content read again unchanged (the
/// device record, its policy) is decoded once rather than per call.
final class LastDecoded<Key: Equatable & Sendable, Value: Sendable>: Sendable {
    private let last = Mutex<(key: Key, value: Value)?>(nil)

    init() {}

    /// The value kept for `key`, or `decode()`'s, which is then kept.
    func value(for key: Key, decode: () throws -> Value) rethrows -> Value {
        if let last = last.withLock({ $0 }), last.key == key { return last.value }
        let value = try decode()
        last.withLock { $0 = (key, value) }
        return value
    }
}
