import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A Unix stream socket to the broker that sends and reads raw varlink bytes: what an attacker (or the codec
/// benchmark capturing a real reply) writes on the wire, byte for byte, with no client library in between.
final class RawConnection {
    private(set) var descriptor: Int32
    /// Bytes read past the last message handed out.
    private var pending: [UInt8] = []

    /// Connects to `path`; `receiveBuffer` sets SO_RCVBUF first (an attacker that never reads keeps it small).
    /// - Throws: `RawConnectionError` naming the failing call.
    init(_ path: String, receiveBuffer: Int32? = nil) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw RawConnectionError("socket", errno) }
        if var size = receiveBuffer {
            _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            _ = Glibc.close(descriptor)
            throw RawConnectionError("connect (path too long)", ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
            for (index, byte) in bytes.enumerated() { sunPath[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            _ = Glibc.close(descriptor)
            throw RawConnectionError("connect", code)
        }
    }

    deinit { close() }

    func close() {
        if descriptor >= 0 {
            _ = Glibc.close(descriptor)
            descriptor = -1
        }
    }

    /// Sends every byte (blocking); false once the peer closed the connection.
    @discardableResult
    func send(_ bytes: some Collection<UInt8>) -> Bool {
        let data = Array(bytes)
        var offset = 0
        while offset < data.count {
            let written = data.withUnsafeBytes { buffer in
                Glibc.send(descriptor, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += written
        }
        return true
    }

    /// Sends what the socket takes now without blocking: the count sent, 0 when it is full, nil once the peer
    /// closed the connection.
    func sendAvailable(_ bytes: ArraySlice<UInt8>) -> Int? {
        let written = bytes.withUnsafeBytes { buffer in
            Glibc.send(descriptor, buffer.baseAddress!, buffer.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
        }
        if written >= 0 { return written }
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : nil
    }

    /// The next whole message (its JSON bytes, without the NUL) within `timeout` milliseconds (nil: waits);
    /// nil when none came in time or the peer closed first (`peerClosed` tells which).
    func readMessage(timeout: Int32? = nil) -> [UInt8]? {
        let deadline = timeout.map { now() + UInt64($0) * 1_000_000 }
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            if let end = pending.firstIndex(of: 0) {
                let message = Array(pending[..<end])
                pending.removeSubrange(...end)
                return message
            }
            if let deadline {
                let left = deadline > now() ? Int32((deadline - now()) / 1_000_000) : 0
                var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let ready = poll(&entry, 1, left)
                if ready == 0 { return nil }
                if ready < 0 { if errno == EINTR { continue } else { return nil } }
            }
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 {
                peerClosed = true
                return nil
            }
            pending.append(contentsOf: chunk[..<count])
        }
    }

    /// Whether the peer has closed the connection (seen by a read, or now by poll's POLLRDHUP/POLLHUP).
    private(set) var peerClosed = false

    /// POLLRDHUP (Linux; Glibc imports it only with _GNU_SOURCE).
    private static let pollReadHangUp: Int16 = 0x2000

    /// Whether the peer has closed its end, without reading (replies it wrote may still be unread).
    var hungUp: Bool {
        if peerClosed { return true }
        var entry = pollfd(fd: descriptor, events: Self.pollReadHangUp, revents: 0)
        guard poll(&entry, 1, 0) > 0 else { return false }
        return entry.revents & (Self.pollReadHangUp | Int16(POLLHUP | POLLERR)) != 0
    }
}

/// A socket call of `RawConnection` failed.
struct RawConnectionError: Error, CustomStringConvertible {
    var call: String
    var code: Int32

    init(_ call: String, _ code: Int32) {
        self.call = call
        self.code = code
    }

    var description: String { "\(call): \(String(cString: strerror(code)))" }
}
