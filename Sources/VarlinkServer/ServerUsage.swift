#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import Synchronization

/// What the server's connections hold, counted across connections: the bytes of queued calls per uid
/// (`maximumQueuedBytesPerUser`), and whether memory is about to be handed back to the system.
final class ServerUsage: Sendable {
    private let queuedBytesByUser = Mutex<[UInt32: Int]>([:])
    private let trimPending = Mutex(false)

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

    /// Returns freed heap memory to the system (glibc keeps it in its arenas otherwise) a quarter of a
    /// second from now, once for every burst of calls: after connections that held megabytes close, and
    /// their buffers are released, the daemon's resident size comes back down.
    func returnFreedMemory() {
        let first = trimPending.withLock { pending -> Bool in
            defer { pending = true }
            return !pending
        }
        guard first else { return }
        Task { [self] in
            try? await Task.sleep(for: .milliseconds(250))
            trimPending.withLock { $0 = false }
            if let trim = Self.mallocTrim { _ = trim(0) }
        }
    }

    /// glibc's `malloc_trim`, looked up at run time (Swift's Glibc module does not import <malloc.h>).
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()
}
