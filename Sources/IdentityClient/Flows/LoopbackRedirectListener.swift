import Foundation
import Synchronization
import SystemPackage

/// The app's side of an RFC 8252 loopback redirect: a one-shot HTTP listener on `127.0.0.1` on a port
/// the system picks, that waits for the browser to bring back the authorization response.
///
/// Its socket calls go through `LoopbackSocket` (typed `Errno`s, every return code checked) and
/// swift-system's `FileDescriptor` (read, close).
final class LoopbackRedirectListener: Sendable {
    /// The port the listener is bound to.
    let port: UInt16
    private let socket: FileDescriptor
    private let closed = Atomic<Bool>(false)

    /// Binds `127.0.0.1:port` (0: a free port the system picks) and listens.
    /// - Throws: `unsupported` when no loopback socket can be opened or the port is taken.
    init(port requested: UInt16 = 0) throws(IdentityError) {
        let socket: FileDescriptor
        do {
            socket = try LoopbackSocket.open()
        } catch {
            throw IdentityError(
                .unsupported,
                "cannot open a loopback socket for the redirect (\(error), errno \(error.rawValue))"
            )
        }
        do {
            try LoopbackSocket.allowRebindingDuringTimeWait(socket)
            try LoopbackSocket.bindLoopback(socket, port: requested)
            try LoopbackSocket.startListening(socket, backlog: 8)
            port = try LoopbackSocket.boundPort(socket)
        } catch {
            // The errno was captured by the failing call; closing cannot overwrite it.
            Self.close(socket)
            throw IdentityError(
                .unsupported,
                "cannot listen on 127.0.0.1:\(requested) for the redirect (\(error), errno \(error.rawValue)); is another sign-in running?"
            )
        }
        self.socket = socket
    }

    deinit { shutDown() }

    /// Stops listening (idempotent).
    func shutDown() {
        if !closed.exchange(true, ordering: .acquiringAndReleasing) { Self.close(socket) }
    }

    /// Waits for one request to `path` and returns its query fields; answers it with a page telling the
    /// user to go back to the app. Other paths (a browser's `/favicon.ico`) get 404 and waiting goes on.
    /// - Throws: `userCanceled` when the task is canceled or `deadline` passes; `unsupported` when the
    ///   listening socket fails.
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

    private func acceptLoop(
        path: String,
        deadline: Date,
        canceled: CancelFlag
    ) -> Result<[String: String], IdentityError> {
        while true {
            if canceled.isSet { return .failure(IdentityError(.userCanceled, "the sign-in was canceled")) }
            if Date() >= deadline {
                return .failure(
                    IdentityError(
                        .userCanceled,
                        "the sign-in in the browser did not finish in time; run the sign-in again"
                    )
                )
            }
            let connection: FileDescriptor
            do {
                guard try LoopbackSocket.waitReadable(socket, milliseconds: 200),
                    let accepted = try LoopbackSocket.acceptConnection(socket)
                else { continue }
                connection = accepted
            } catch {
                return .failure(
                    IdentityError(
                        .unsupported,
                        "the loopback listener for the redirect failed (\(error), errno \(error.rawValue)); run the sign-in again"
                    )
                )
            }
            defer { Self.close(connection) }
            guard let target = Self.readRequestTarget(connection) else { continue }
            let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            let requestPath = parts[0].isEmpty ? "/" : String(parts[0])
            guard requestPath == path else {
                Self.respond(connection, status: "404 Not Found", body: "Not found")
                continue
            }
            let fields = parts.count > 1 ? FormEncoding.decode(String(parts[1])) : [:]
            let finished = fields["error"] == nil
            Self.respond(
                connection,
                status: "200 OK",
                body: finished
                    ? "Sign-in finished. You can close this window and return to the app."
                    : "Sign-in did not finish. Return to the app for details."
            )
            return .success(fields)
        }
    }

    /// Reads the request head (at most 16 KB, 5 s) and returns the request target of a `GET`; `nil` when
    /// the browser sent no such head in time or the connection failed.
    private static func readRequestTarget(_ connection: FileDescriptor) -> String? {
        var head = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        let headEnd = Data("\r\n\r\n".utf8)
        let started = Date()
        while head.count < 16_384, Date().timeIntervalSince(started) < 5 {
            do {
                guard try LoopbackSocket.waitReadable(connection, milliseconds: 200) else { continue }
                let count = try buffer.withUnsafeMutableBytes { try connection.read(into: $0, retryOnInterrupt: true) }
                guard count > 0 else { break }
                head.append(contentsOf: buffer[0..<count])
            } catch {
                return nil
            }
            if head.range(of: headEnd) != nil { break }
        }
        guard let text = String(data: head, encoding: .utf8), let line = text.split(separator: "\r\n").first else {
            return nil
        }
        let words = line.split(separator: " ")
        guard words.count >= 2, words[0] == "GET" else { return nil }
        return String(words[1])
    }

    /// Answers with a small page. A browser that has gone away gets nothing; the redirect it brought
    /// was read already.
    private static func respond(_ connection: FileDescriptor, status: String, body: String) {
        let page = "<!doctype html><meta charset=utf-8><title>Sign-in</title><p>\(body)</p>"
        let response =
            "HTTP/1.1 \(status)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(page.utf8.count)\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n\(page)"
        do { try LoopbackSocket.sendAll(connection, Array(response.utf8)) } catch {}
    }

    /// Closes a descriptor. Nothing can be done about a failed close: `EBADF` cannot happen (each
    /// descriptor is closed once), and Linux releases the descriptor even when `close` reports `EINTR`
    /// or `EIO` (retrying could close a descriptor another thread just opened).
    private static func close(_ descriptor: FileDescriptor) {
        do { try descriptor.close() } catch {}
    }
}

/// A flag one task sets and a thread polls.
final class CancelFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}
