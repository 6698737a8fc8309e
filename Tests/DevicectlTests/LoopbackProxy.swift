import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP forward proxy on 127.0.0.1 for the CLI tests, standing between `devicectl` and the local
/// identity provider the way a network on the device's path would: `devicectl` reaches it through
/// `http_proxy` (libcurl, under Foundation's URLSession on Linux, honours it). Every request is passed to
/// the provider untouched, except the paths in `replacements`, which the proxy answers itself.
///
/// Plain HTTP/1.1 over POSIX sockets, one thread per connection, one request per connection
/// (`Connection: close` both ways); enough for a test, not a general-purpose proxy.
final class LoopbackProxy: Sendable {
    /// The port the proxy listens on (chosen by the kernel).
    let port: UInt16
    /// The provider's port: the only origin the proxy forwards to.
    let upstreamPort: UInt16
    private let listener: Int32
    private let replacements: [String: Data]
    private let state = Mutex(State())

    private struct State {
        var requests: [String] = []
        var stopped = false
    }

    /// `http_proxy` for a child process.
    var url: String { "http://127.0.0.1:\(port)" }

    /// Every request seen, as `METHOD path` (path without the query), in arrival order.
    var requests: [String] { state.withLock { $0.requests } }

    /// Starts a proxy to `127.0.0.1:upstreamPort` answering `replacements` (path → JSON body) itself.
    init(upstreamPort: UInt16, replacements: [String: Data]) throws {
        self.upstreamPort = upstreamPort
        self.replacements = replacements
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw ProxyError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 16) == 0 else {
            close(descriptor)
            throw ProxyError("bind/listen on 127.0.0.1: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        listener = descriptor
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Stops accepting connections (those in progress finish).
    func stop() {
        state.withLock { $0.stopped = true }
    }

    deinit {
        close(listener)
    }

    // MARK: - Serving

    private func acceptLoop() {
        while !state.withLock({ $0.stopped }) {
            var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 100) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            Thread.detachNewThread { [self] in
                serve(client)
                close(client)
            }
        }
    }

    private func serve(_ client: Int32) {
        Self.setTimeout(client)
        guard let request = Self.readRequest(client) else { return }
        state.withLock { $0.requests.append("\(request.method) \(request.path)") }
        if let body = replacements[request.path] {
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
            Self.send(Data(head.utf8) + body, to: client)
            return
        }
        guard request.port == upstreamPort, let upstream = Self.connect(port: upstreamPort) else {
            Self.send(
                Data("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8),
                to: client
            )
            return
        }
        defer { close(upstream) }
        var head = "\(request.method) \(request.target) HTTP/1.1\r\n"
        for (name, value) in request.headers
        where !["connection", "proxy-connection", "keep-alive"].contains(name.lowercased()) {
            head += "\(name): \(value)\r\n"
        }
        head += "Connection: close\r\n\r\n"
        Self.send(Data(head.utf8) + request.body, to: upstream)
        // The provider closes the connection after its response (Connection: close): relay until then.
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(upstream, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            Self.send(Data(buffer[0..<count]), to: client)
        }
    }

    private struct Request {
        var method: String
        /// The origin-form target (`/api/oidc/token?x=y`).
        var target: String
        /// The target without its query.
        var path: String
        var port: UInt16
        var headers: [(String, String)]
        var body: Data
    }

    /// Reads one request in absolute form (`GET http://127.0.0.1:4599/api/oidc/jwks HTTP/1.1`, as a client
    /// talks to a proxy) or origin form, with its `Content-Length` body.
    private static func readRequest(_ client: Int32) -> Request? {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var headEnd: Range<Data.Index>?
        while headEnd == nil {
            let count = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0, data.count < 1_048_576 else { return nil }
            data.append(contentsOf: buffer[0..<count])
            headEnd = data.range(of: Data("\r\n\r\n".utf8))
        }
        guard let headEnd else { return nil }
        let lines = String(decoding: data[..<headEnd.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ").map(String.init)
        guard requestLine.count == 3 else { return nil }
        var headers: [(String, String)] = []
        var length = 0
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append((name, value))
            if name.lowercased() == "content-length" { length = Int(value) ?? 0 }
        }
        var body = Data(data[headEnd.upperBound...])
        while body.count < length {
            let count = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return nil }
            body.append(contentsOf: buffer[0..<count])
        }
        var target = requestLine[1]
        var port: UInt16 = 80
        if let url = URL(string: target), url.scheme == "http" {
            port = UInt16(url.port ?? 80)
            target = url.path.isEmpty ? "/" : url.path
            if let query = url.query { target += "?" + query }
        }
        let path = String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        return Request(method: requestLine[0], target: target, path: path, port: port, headers: headers, body: body)
    }

    private static func connect(port: UInt16) -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            return nil
        }
        setTimeout(descriptor)
        return descriptor
    }

    private static func send(_ data: Data, to descriptor: Int32) {
        var offset = 0
        while offset < data.count {
            let written = data.withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress! + offset, data.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }

    /// A peer that stops talking for 30 s ends its connection (no thread waits forever).
    private static func setTimeout(_ descriptor: Int32) {
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// `GET path` on the provider directly (HTTP/1.0, so the body is not chunked); the response body.
    static func get(_ path: String, port: UInt16) throws -> Data {
        guard let descriptor = connect(port: port) else { throw ProxyError("cannot connect to 127.0.0.1:\(port)") }
        defer { close(descriptor) }
        send(
            Data("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\nAccept: application/json\r\n\r\n".utf8),
            to: descriptor
        )
        var response = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            response.append(contentsOf: buffer[0..<count])
        }
        guard let headEnd = response.range(of: Data("\r\n\r\n".utf8)),
            String(decoding: response[..<headEnd.lowerBound], as: UTF8.self).hasPrefix("HTTP/1.1 200")
                || String(decoding: response[..<headEnd.lowerBound], as: UTF8.self).hasPrefix("HTTP/1.0 200")
        else {
            throw ProxyError(
                "GET \(path) on 127.0.0.1:\(port) failed: \(String(decoding: response.prefix(200), as: UTF8.self))"
            )
        }
        return Data(response[headEnd.upperBound...])
    }
}

/// The proxy could not start or reach the provider.
struct ProxyError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
