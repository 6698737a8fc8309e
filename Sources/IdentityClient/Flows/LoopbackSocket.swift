import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The socket calls of the loopback listener that swift-system does not wrap, one small wrapper per
/// syscall in the manner of swift-system's `Syscalls.swift`: each checks the return code and throws the
/// `Errno` read right after the call (before anything else can overwrite `errno`). Descriptors are
/// swift-system `FileDescriptor`s, closed and read through it.
enum LoopbackSocket {
    /// `socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)`.
    static func open() throws(Errno) -> FileDescriptor {
        #if canImport(Glibc)
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw Errno(rawValue: errno) }
        return FileDescriptor(rawValue: fd)
    }

    /// `SO_REUSEADDR`: a fixed redirect port binds again while the last sign-in's connection is in TIME_WAIT
    /// (the listener closes first, so for a minute after a browser sign-in the port would be "in use"). It
    /// never lets a second socket listen on a port another one listens on.
    static func allowRebindingDuringTimeWait(_ socket: FileDescriptor) throws(Errno) {
        var on: Int32 = 1
        guard setsockopt(socket.rawValue, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size)) == 0
        else {
            throw Errno(rawValue: errno)
        }
    }

    /// `bind` to `127.0.0.1:port` (0: a port the system picks).
    static func bindLoopback(_ socket: FileDescriptor, port: UInt16) throws(Errno) {
        var address = loopbackAddress(port: port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket.rawValue, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else { throw Errno(rawValue: errno) }
    }

    /// `listen` with a backlog of `backlog` connections.
    static func startListening(_ socket: FileDescriptor, backlog: Int32) throws(Errno) {
        guard listen(socket.rawValue, backlog) == 0 else { throw Errno(rawValue: errno) }
    }

    /// The port a bound socket has (`getsockname`).
    static func boundPort(_ socket: FileDescriptor) throws(Errno) -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket.rawValue, $0, &length) }
        }
        guard result == 0 else { throw Errno(rawValue: errno) }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Whether `socket` becomes readable (a connection to accept, or data) within `milliseconds`
    /// (`poll`); an interrupted wait counts as not readable.
    static func waitReadable(_ socket: FileDescriptor, milliseconds: Int32) throws(Errno) -> Bool {
        var poller = pollfd(fd: socket.rawValue, events: Int16(POLLIN), revents: 0)
        let result = poll(&poller, 1, milliseconds)
        if result < 0 {
            let error = Errno(rawValue: errno)
            if error == .interrupted { return false }
            throw error
        }
        return result > 0
    }

    /// The next connection (`accept`), or `nil` when the one that was waiting went away first or the
    /// call was interrupted (the caller polls again).
    static func acceptConnection(_ socket: FileDescriptor) throws(Errno) -> FileDescriptor? {
        let fd = accept(socket.rawValue, nil, nil)
        guard fd >= 0 else {
            let error = Errno(rawValue: errno)
            if [.interrupted, .resourceTemporarilyUnavailable, .connectionAbort].contains(error) { return nil }
            throw error
        }
        return FileDescriptor(rawValue: fd)
    }

    /// Sends all of `bytes` without raising `SIGPIPE` when the browser has gone (`send` with
    /// `MSG_NOSIGNAL`, which `FileDescriptor.write` cannot pass).
    static func sendAll(_ connection: FileDescriptor, _ bytes: [UInt8]) throws(Errno) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { buffer in
                send(connection.rawValue, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                let error = Errno(rawValue: errno)
                if error == .interrupted { continue }
                throw error
            }
            offset += sent
        }
    }

    private static func loopbackAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian  // 127.0.0.1
        return address
    }
}
