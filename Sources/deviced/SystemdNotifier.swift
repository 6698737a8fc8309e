import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `sd_notify(3)` without libsystemd: a datagram such as `READY=1` to the Unix socket named by
/// `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace). Does nothing when the variable is
/// unset (a plain start).
struct SystemdNotifier: Sendable {
    let socketPath: String?

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Sends `state` (e.g. `READY=1`); returns whether it was sent.
    @discardableResult
    func notify(_ state: String) -> Bool {
        guard let socketPath else { return false }
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socketPath.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            for (index, byte) in path.enumerated() { bytes[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                state.utf8CString.withUnsafeBufferPointer { text in
                    sendto(descriptor, text.baseAddress, text.count - 1, Int32(MSG_NOSIGNAL), socketAddress, length)
                }
            }
        }
        return sent >= 0
    }
}
