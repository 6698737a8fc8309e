import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The process listening on a Unix socket, as the kernel identified it (`struct ucred`).
public struct VarlinkPeer: Sendable, Equatable {
    /// Its process id.
    public var pid: Int32
    /// Its effective user id.
    public var uid: UInt32
    /// Its effective group id.
    public var gid: UInt32

    /// Credentials as given.
    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// A blocking varlink client on a Unix stream socket: send a call, read its replies. One call at a time
/// per connection (varlink answers in order); a `more` call's replies are read with `nextReply()` until
/// one arrives without `continues`. Not thread-safe: one connection per thread or task.
public final class VarlinkConnection {
    /// The socket's path.
    public let path: String
    private var descriptor: Int32
    private var decoder: VarlinkFrameDecoder
    /// What each `recv` fills, kept for the connection's life (a reply's wait allocates nothing).
    private var readBuffer = [UInt8](repeating: 0, count: 65_536)

    /// Connects to the service listening at `path`.
    /// - Parameter maximumReplyBytes: the largest reply accepted (default 16 MiB).
    /// - Throws: `notRunning` (no socket, or nobody listening), `permissionDenied`, `io`.
    public init(unixSocketPath path: String, maximumReplyBytes: Int = 16 << 20) throws(VarlinkConnectionError) {
        self.path = path
        decoder = VarlinkFrameDecoder(maximumMessageBytes: maximumReplyBytes)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw VarlinkConnectionError(.io, "the socket path \(path) is empty or too long for a Unix socket")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
            for (index, byte) in bytes.enumerated() { sunPath[index] = byte }
        }
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            throw VarlinkConnectionError(.io, "cannot create a socket: \(Self.describe(errno))")
        }
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if connected != 0 {
            let code = errno
            _ = Glibc.close(descriptor)
            switch code {
            case ENOENT, ECONNREFUSED, ENOTDIR:
                throw VarlinkConnectionError(.notRunning, "nothing listens on \(path) (\(Self.describe(code)))")
            case EACCES, EPERM:
                throw VarlinkConnectionError(.permissionDenied, "no permission to connect to \(path)")
            default:
                throw VarlinkConnectionError(.io, "cannot connect to \(path): \(Self.describe(code))")
            }
        }
    }

    deinit { close() }

    /// Who listens at the other end, as the kernel says (`SO_PEERCRED`: the process that created the
    /// listening socket, when it did). A client checks it before sending anything.
    /// - Throws: `io` when the kernel does not say.
    public func peer() throws(VarlinkConnectionError) -> VarlinkPeer {
        var credentials = VarlinkPeer(pid: 0, uid: UInt32.max, gid: UInt32.max)
        var length = socklen_t(MemoryLayout<VarlinkPeer>.size)
        let status = withUnsafeMutablePointer(to: &credentials) {
            getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, $0, &length)
        }
        guard status == 0, length == socklen_t(MemoryLayout<VarlinkPeer>.size) else {
            throw VarlinkConnectionError(
                .io,
                "cannot tell who listens on \(path) (SO_PEERCRED: \(Self.describe(errno)))"
            )
        }
        return credentials
    }

    /// Closes the connection (a call in progress at the service is cancelled).
    public func close() {
        if descriptor >= 0 {
            _ = Glibc.close(descriptor)
            descriptor = -1
        }
    }

    /// Sends `call` and returns its one reply (for a `more` call, its first; read the rest with `nextReply`).
    /// - Throws: `connectionLost`, `protocolViolation`, `io`.
    public func call(_ call: VarlinkCall) throws(VarlinkConnectionError) -> VarlinkReply {
        try send(call)
        return try nextReply()
    }

    /// Sends `call` without reading a reply.
    public func send(_ call: VarlinkCall) throws(VarlinkConnectionError) {
        let data = call.encoded()
        var offset = 0
        while offset < data.count {
            let written = data.withUnsafeBytes { buffer in
                Glibc.send(descriptor, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0 {
                let code = errno
                if code == EINTR { continue }
                throw code == EPIPE || code == ECONNRESET
                    ? VarlinkConnectionError(.connectionLost, "the service at \(path) closed the connection")
                    : VarlinkConnectionError(.io, "cannot send to \(path): \(Self.describe(code))")
            }
            offset += written
        }
    }

    /// The next reply on the connection.
    /// - Parameter timeout: give up (`timedOut`) after this long without a whole reply; `nil` waits.
    /// - Throws: `connectionLost` (the service closed the connection), `protocolViolation`, `timedOut`, `io`.
    public func nextReply(timeout: Duration? = nil) throws(VarlinkConnectionError) -> VarlinkReply {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        while true {
            do {
                if let message = try decoder.nextMessage() { return try VarlinkReply.decode(message) }
            } catch {
                throw VarlinkConnectionError(
                    .protocolViolation,
                    "the service at \(path) sent something that is not a varlink reply: \(error.message)"
                )
            }
            if let deadline {
                let left = ContinuousClock.now.duration(to: deadline)
                let milliseconds = max(
                    0,
                    Int32(
                        clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
                    )
                )
                var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let ready = poll(&entry, 1, milliseconds)
                if ready == 0 { throw VarlinkConnectionError(.timedOut, "no reply from \(path) in time") }
                if ready < 0 && errno != EINTR {
                    throw VarlinkConnectionError(.io, "cannot wait for \(path): \(Self.describe(errno))")
                }
                if ready <= 0 { continue }
            }
            let count = readBuffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 {
                throw VarlinkConnectionError(.connectionLost, "the service at \(path) closed the connection")
            }
            if count < 0 {
                let code = errno
                if code == EINTR { continue }
                throw code == ECONNRESET
                    ? VarlinkConnectionError(.connectionLost, "the service at \(path) closed the connection")
                    : VarlinkConnectionError(.io, "cannot read from \(path): \(Self.describe(code))")
            }
            decoder.append(readBuffer[..<count])
        }
    }

    private static func describe(_ code: Int32) -> String { String(cString: strerror(code)) }
}

/// A varlink connection failed (as opposed to the service answering with an error reply).
public struct VarlinkConnectionError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        /// No socket at the path, or nobody listening on it.
        case notRunning
        /// The socket's permissions do not let this user connect.
        case permissionDenied
        /// The service closed the connection (it stopped, or refused the connection).
        case connectionLost
        /// The service's bytes are not varlink replies.
        case protocolViolation
        /// No reply within the caller's timeout.
        case timedOut
        /// Any other socket error.
        case io
    }

    public let code: Code
    /// What happened, naming the socket.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
