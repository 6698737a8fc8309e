import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What the server's connections hold, counted across connections: the bytes of queued calls per uid
/// (`maximumQueuedBytesPerUser`) and in total (`maximumQueuedBytesInTotal`), the bytes of replies written
/// and not yet taken by the peers per uid and in total (`maximumUnreadReplyBytesPerUser`, `…InTotal`), and
/// whether memory is about to be handed back to the system.
final class ServerUsage: Sendable {
    /// Bytes counted per uid, and over every uid.
    private struct Counts {
        var byUser: [UInt32: Int] = [:]
        var total = 0

        /// Counts `bytes` more for `uid` when `admitted` says so given what is counted now (the uid's, the total).
        mutating func reserve(_ bytes: Int, for uid: UInt32, admitted: (_ user: Int, _ total: Int) -> Bool) -> Bool {
            let current = byUser[uid, default: 0]
            guard admitted(current, total) else { return false }
            byUser[uid] = current + bytes
            total += bytes
            return true
        }

        mutating func release(_ bytes: Int, for uid: UInt32) {
            guard bytes > 0 else { return }
            let left = byUser[uid, default: 0] - bytes
            byUser[uid] = left > 0 ? left : nil
            total = max(total - bytes, 0)
        }
    }

    private let queued = Mutex(Counts())
    private let unreadReplies = Mutex(Counts())
    private let trimPending = Mutex(false)

    /// Counts `bytes` more queued for `uid` if that keeps it within `limit`, and all the uids within
    /// `totalLimit` (none: a privileged peer's are counted, never refused by the total) unless the uid stays
    /// within `guaranteed` (so that the others filling the total cannot starve it); the limit broken
    /// otherwise (nothing counted then).
    func reserveQueuedBytes(
        _ bytes: Int,
        for uid: UInt32,
        limit: Int,
        totalLimit: Int?,
        guaranteed: Int
    ) -> QueuedBytesRefusal? {
        var refusal: QueuedBytesRefusal?
        _ = queued.withLock { counts in
            counts.reserve(bytes, for: uid) { user, total in
                if user + bytes > limit {
                    refusal = .user
                } else if let totalLimit, total + bytes > totalLimit, user + bytes > guaranteed {
                    refusal = .total
                }
                return refusal == nil
            }
        }
        return refusal
    }

    /// Which bound a queued call broke.
    enum QueuedBytesRefusal { case user, total }

    /// Gives back `bytes` queued for `uid` (their call finished or the connection closed).
    func releaseQueuedBytes(_ bytes: Int, for uid: UInt32) {
        queued.withLock { $0.release(bytes, for: uid) }
    }

    /// The bytes of calls queued for `uid` now.
    func queuedBytes(for uid: UInt32) -> Int { queued.withLock { $0.byUser[uid, default: 0] } }

    /// Counts a reply of `bytes` written to a connection of `uid` and not yet taken by its socket. It is
    /// refused (nothing counted) when the uid already leaves replies unread, `limit` bytes or more of them,
    /// or, with a `totalLimit` (not for privileged peers), when the uids together leave that much unread: a
    /// uid that takes its replies as they come always gets the next one.
    func reserveUnreadReply(_ bytes: Int, for uid: UInt32, limit: Int, totalLimit: Int?) -> Bool {
        unreadReplies.withLock { counts in
            counts.reserve(bytes, for: uid) { user, total in
                user == 0 || (user < limit && total < totalLimit ?? .max)
            }
        }
    }

    /// A reply of `bytes` counted by `reserveUnreadReply` was taken by the socket (or dropped with its connection).
    func releaseUnreadReply(_ bytes: Int, for uid: UInt32) {
        unreadReplies.withLock { $0.release(bytes, for: uid) }
    }

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
