import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The app's side of an RFC 8252 loopback redirect: a one-shot HTTP listener on `127.0.0.1` on a port
/// the system picks, that waits for the browser to bring back the authorization response.
final class LoopbackRedirectListener: Sendable {
    /// The port the listener is bound to.
    let port: UInt16
    private let socket: Int32
    private let closed = Atomic<Bool>(false)

    /// Binds `127.0.0.1:port` (0: a free port the system picks) and listens.
    /// - Throws: `unsupported` when no loopback socket can be opened or the port is taken.
    init(port requested: UInt16 = 0) throws(IdentityError) {
        #if canImport(Glibc)
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw IdentityError(.unsupported, "cannot open a loopback socket for the redirect (errno \(errno))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = requested.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            close(fd)
            throw IdentityError(.unsupported, "cannot listen on 127.0.0.1:\(requested) for the redirect (errno \(errno)); is another sign-in running?")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        socket = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit { shutDown() }

    /// Stops listening (idempotent).
    func shutDown() {
        if !closed.exchange(true, ordering: .acquiringAndReleasing) { close(socket) }
    }

    /// Waits for one request to `path` and returns its query fields; answers it with a page telling the
    /// user to go back to the app. Other paths (a browser's `/favicon.ico`) get 404 and waiting goes on.
    /// - Throws: `userCanceled` when the task is canceled or `deadline` passes.
    func waitForRedirect(path: String, deadline: Date) async throws(IdentityError) -> [String: String] {
        let canceled = CancelFlag()
        let result: Result<[String: String], IdentityError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                Thread.detachNewThread { [self] in
                    continuation.resume(returning: self.acceptLoop(path: path, deadline: deadline, canceled: canceled))
                }
            }
        } onCancel: {
            canceled.set()
        }
        return try result.get()
    }

    private func acceptLoop(path: String, deadline: Date, canceled: CancelFlag) -> Result<[String: String], IdentityError> {
        while true {
            if canceled.isSet { return .failure(IdentityError(.userCanceled, "the sign-in was canceled")) }
            if Date() >= deadline {
                return .failure(IdentityError(.userCanceled, "the sign-in in the browser did not finish in time; run the sign-in again"))
            }
            var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 200) > 0 else { continue }
            let connection = accept(socket, nil, nil)
            guard connection >= 0 else { continue }
            defer { close(connection) }
            guard let target = Self.readRequestTarget(connection) else { continue }
            let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            let requestPath = parts[0].isEmpty ? "/" : String(parts[0])
            guard requestPath == path else {
                Self.respond(connection, status: "404 Not Found", body: "Not found")
                continue
            }
            let fields = parts.count > 1 ? FormEncoding.decode(String(parts[1])) : [:]
            let finished = fields["error"] == nil
            Self.respond(connection, status: "200 OK", body: finished
                ? "Sign-in finished. You can close this window and return to the app."
                : "Sign-in did not finish. Return to the app for details.")
            return .success(fields)
        }
    }

    /// Reads the request head (at most 16 KB, 5 s) and returns the request target of a `GET`.
    private static func readRequestTarget(_ connection: Int32) -> String? {
        var head = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        let headEnd = Data("\r\n\r\n".utf8)
        let started = Date()
        while head.count < 16_384, Date().timeIntervalSince(started) < 5 {
            var poller = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 200) > 0 else { continue }
            let count = recv(connection, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            head.append(contentsOf: buffer[0..<count])
            if Data(head).range(of: headEnd) != nil { break }
        }
        guard let text = String(bytes: head, encoding: .utf8), let line = text.split(separator: "\r\n").first else { return nil }
        let words = line.split(separator: " ")
        guard words.count >= 2, words[0] == "GET" else { return nil }
        return String(words[1])
    }

    private static func respond(_ connection: Int32, status: String, body: String) {
        let page = "<!doctype html><meta charset=utf-8><title>Sign-in</title><p>\(body)</p>"
        let response = "HTTP/1.1 \(status)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(page.utf8.count)\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n\(page)"
        _ = Array(response.utf8).withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }
}

/// A flag one task sets and a thread polls.
final class CancelFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}
