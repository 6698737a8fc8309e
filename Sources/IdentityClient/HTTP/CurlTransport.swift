import CCurl
import Dispatch
public import Foundation

/// `HTTPTransport` over libcurl, loaded with `dlopen` on the first request: a program that links the
/// identity client but sends nothing (most `devicectl` commands) never loads libcurl and the thirty
/// libraries behind it, which Foundation's `URLSession` would load at every start. Speaks HTTP and HTTPS
/// only, verifies TLS against the system's certificate authorities, honours the usual proxy variables,
/// and does not follow redirects: identity endpoints answer directly. Each exchange blocks a thread of its
/// own; `slots` bounds how many run at once (the others wait their turn).
public struct CurlTransport: HTTPTransport {
    private let timeout: TimeInterval
    private let slots: CurlExchangeSlots

    /// - Parameters:
    ///   - timeout: seconds to wait for a whole exchange before the authority counts as unreachable (the
    ///     wait for a slot not counted).
    ///   - slots: the exchanges that may run at once, shared with other transports (by default the
    ///     process's `CurlExchangeSlots.shared`).
    public init(timeout: TimeInterval = 30, slots: CurlExchangeSlots = .shared) {
        self.timeout = timeout
        self.slots = slots
    }

    public func send(_ request: HTTPRequest) async throws(IdentityError) -> HTTPResponse {
        let owner = CurlExchangeSlots.Owner.current
        guard await slots.acquire(for: owner) else {
            throw IdentityError(.userCanceled, "the request to \(request.url.host ?? "the authority") was canceled")
        }
        defer { slots.release(for: owner) }
        let cancelFlag = RequestCancelFlag()
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                // libcurl blocks: on a thread of its own, never one of the cooperative pool's — nor of
                // Dispatch's global queue, whose few threads (one per core) other blocking work may hold,
                // so that a request would wait there past its own timeout.
                let thread = Thread {
                    continuation.resume(returning: Self.perform(request, timeout: timeout, cancelFlag: cancelFlag))
                }
                thread.name = "curl"
                thread.start()
            }
        } onCancel: {
            cancelFlag.raise()
        }
        switch outcome {
        case .response(let response):
            return response
        case .failure(let error, _) where error == ccurl_canceled:
            throw IdentityError(.userCanceled, "the request to \(request.url.host ?? "the authority") was canceled")
        case .failure(let error, let message):
            throw IdentityError(
                .authorityUnreachable,
                "cannot reach the authority at \(Self.origin(of: request.url)) (\(Self.reason(error, message))); check the network and that the identity provider is running"
            )
        }
    }

    /// `scheme://host:port` — never the path or query, which may carry codes.
    static func origin(of url: URL) -> String {
        var text = "\(url.scheme ?? "https")://\(url.host ?? "?")"
        if let port = url.port { text += ":\(port)" }
        return text
    }

    private enum Outcome: Sendable {
        case response(HTTPResponse)
        case failure(ccurl_error, String)
    }

    private static func reason(_ error: ccurl_error, _ message: String) -> String {
        switch error {
        case ccurl_refused: "connection refused"
        case ccurl_timed_out: "timed out"
        case ccurl_host_not_found: "host not found"
        case ccurl_tls_failed: "TLS failed: \(message)"
        case ccurl_unavailable: message
        default: "network error: \(message)"
        }
    }

    /// One blocking exchange (run off the cooperative pool).
    private static func perform(_ request: HTTPRequest, timeout: TimeInterval, cancelFlag: RequestCancelFlag) -> Outcome
    {
        let headerLines = request.headers.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        var response = ccurl_response()
        defer { ccurl_response_free(&response) }
        let error = withCStrings(headerLines) { headers in
            request.method.withCString { method in
                request.url.absoluteString.withCString { url in
                    (request.body ?? Data()).withUnsafeBytes { body in
                        var curlRequest = ccurl_request(
                            method: method,
                            url: url,
                            headers: headers.baseAddress,
                            header_count: headers.count,
                            body: request.body == nil ? nil : body.baseAddress ?? UnsafeRawPointer(bitPattern: 1),
                            body_length: body.count,
                            timeout_ms: Int(max(1, timeout * 1000)),
                            cancel_flag: cancelFlag.pointer
                        )
                        return ccurl_perform(&curlRequest, &response)
                    }
                }
            }
        }
        guard error == ccurl_ok else {
            let message = withUnsafeBytes(of: response.message) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            return .failure(error, message)
        }
        let body = response.body.map { Data(bytes: $0, count: response.body_length) } ?? Data()
        let rawHeaders =
            response.headers.map {
                String(decoding: UnsafeRawBufferPointer(start: $0, count: response.headers_length), as: UTF8.self)
            } ?? ""
        return .response(HTTPResponse(status: response.status, headers: parseHeaders(rawHeaders), body: body))
    }

    /// The fields of the last response's header block (an interim `100 Continue` has its own), names lowercased.
    static func parseHeaders(_ raw: String) -> [String: String] {
        var headers: [String: String] = [:]
        for line in raw.split(
            omittingEmptySubsequences: true,
            whereSeparator: { $0 == "\r\n" || $0 == "\n" || $0 == "\r" }
        ) {
            if line.hasPrefix("HTTP/") {
                headers = [:]  // a new response's status line
                continue
            }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return headers
    }

    /// `body` with `strings` as an array of C strings.
    private static func withCStrings<R>(
        _ strings: [String],
        _ body: (UnsafeBufferPointer<UnsafePointer<CChar>?>) -> R
    ) -> R {
        let copies = strings.map { strdup($0) }
        defer {
            for copy in copies { free(copy) }
        }
        return copies.map { UnsafePointer($0) }.withUnsafeBufferPointer(body)
    }
}

/// The flag libcurl's progress callback polls; raised when the awaiting task is canceled.
private final class RequestCancelFlag: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<Int32>

    init() {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: 0)
    }

    /// Atomic store (ccurl_cancel); the pointer itself never changes, so the class is safe to share.
    func raise() { ccurl_cancel(pointer) }

    deinit { pointer.deallocate() }
}
