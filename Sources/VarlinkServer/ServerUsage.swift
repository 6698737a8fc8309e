#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import Synchronization

/// What the server's connections hold, counted across connections: the bytes of queued calls per uid
/// (`maximumQueuedBytesPerUser`), and when memory was last handed back to the system.
final class ServerUsage: Sendable {
    private let queuedBytesByUser = Mutex<[UInt32: Int]>([:])
    private let lastTrim = Mutex<NIODeadline>(.uptimeNanoseconds(0))

    /// Counts `bytes` more queued for `uid` if that keeps it within `limit`; false (nothing counted) otherwise.
    func reserveQueuedBytes(_ bytes: Int, for uid: UInt32, limit: Int) -> Bool {
        queuedBytesByUser.withLock { usage in
            let current = usage[uid, default: 0]
            guard current + bytes <= limit else { return false }
            usage[uid] = current + bytes
            return true
        }
    }

    /// Gives back `bytes` queued for `uid` (their call finished or the connection closed).
    func releaseQueuedBytes(_ bytes: Int, for uid: UInt32) {
        guard bytes > 0 else { return }
        queuedBytesByUser.withLock { usage in
            let left = usage[uid, default: 0] - bytes
            usage[uid] = left > 0 ? left : nil
        }
    }

    /// The bytes of calls queued for `uid` now.
    func queuedBytes(for uid: UInt32) -> Int { queuedBytesByUser.withLock { $0[uid, default: 0] } }

    /// Returns freed heap memory to the system (glibc keeps it in its arenas otherwise), at most once a
    /// second: after a connection that held megabytes closes, the daemon's resident size comes back down.
    func returnFreedMemory() {
        let now = NIODeadline.now()
        let due = lastTrim.withLock { last -> Bool in
            guard now - last >= .seconds(1) else { return false }
            last = now
            return true
        }
        if due, let trim = Self.mallocTrim { _ = trim(0) }
    }

    /// glibc's `malloc_trim`, looked up at run time (Swift's Glibc module does not import <malloc.h>).
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()
}
