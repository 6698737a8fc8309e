public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP request an identity flow sends.
public struct HTTPRequest: Sendable, Equatable {
    /// `GET` or `POST`.
    public var method: String
    /// Where it goes.
    public var url: URL
    /// Header fields.
    public var headers: [String: String]
    /// The body (form-encoded for token requests).
    public var body: Data?

    public init(method: String = "GET", url: URL, headers: [String: String] = [:], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// A `POST` with an `application/x-www-form-urlencoded` body (RFC 6749 §4.1.3, RFC 8628 §3.1).
    public static func form(_ url: URL, _ fields: [(String, String)]) -> HTTPRequest {
        HTTPRequest(method: "POST", url: url,
                    headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
                    body: Data(FormEncoding.encode(fields).utf8))
    }
}

/// The answer to an `HTTPRequest`.
public struct HTTPResponse: Sendable, Equatable {
    /// The status code.
    public var status: Int
    /// Header fields, names lowercased.
    public var headers: [String: String]
    /// The body.
    public var body: Data

    public init(status: Int, headers: [String: String] = [:], body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// 2xx.
    public var isSuccess: Bool { (200..<300).contains(status) }
}

/// Sends HTTP requests. The identity client's only way to the network, so a caller can add a proxy,
/// logging or (in tests) a tampering step around the real thing.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the response, whatever its status.
    /// - Throws: `IdentityError(.authorityUnreachable)` when no response arrived (refused, DNS, TLS, timeout).
    func send(_ request: HTTPRequest) async throws(IdentityError) -> HTTPResponse
}

/// `HTTPTransport` over Foundation's `URLSession` (libcurl on Linux). Does not follow redirects to
/// another host silently: identity endpoints answer directly.
public struct URLSessionTransport: HTTPTransport {
    private let session: URLSession
    private let timeout: TimeInterval

    /// - Parameter timeout: seconds to wait for a response before the authority counts as unreachable.
    public init(timeout: TimeInterval = 30) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration)
        self.timeout = timeout
    }

    public func send(_ request: HTTPRequest) async throws(IdentityError) -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url, timeoutInterval: timeout)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = request.body
        let data: Data, response: URLResponse
        do {
            (data, response) = try await session.data(for: urlRequest)
        } catch is CancellationError {
            throw IdentityError(.userCanceled, "the request to \(request.url.host ?? "the authority") was canceled")
        } catch {
            if (error as? URLError)?.code == .cancelled {
                throw IdentityError(.userCanceled, "the request to \(request.url.host ?? "the authority") was canceled")
            }
            throw IdentityError(.authorityUnreachable,
                "cannot reach the authority at \(Self.origin(of: request.url)) (\(Self.reason(error))); check the network and that the identity provider is running")
        }
        guard let http = response as? HTTPURLResponse else {
            throw IdentityError(.invalidResponse, "the authority at \(Self.origin(of: request.url)) did not answer with HTTP")
        }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return HTTPResponse(status: http.statusCode, headers: headers, body: data)
    }

    /// `scheme://host:port` — never the path or query, which may carry codes.
    static func origin(of url: URL) -> String {
        var text = "\(url.scheme ?? "https")://\(url.host ?? "?")"
        if let port = url.port { text += ":\(port)" }
        return text
    }

    private static func reason(_ error: any Error) -> String {
        guard let urlError = error as? URLError else { return "network error" }
        switch urlError.code {
        case .cannotConnectToHost: return "connection refused"
        case .timedOut: return "timed out"
        case .cannotFindHost, .dnsLookupFailed: return "host not found"
        case .notConnectedToInternet, .networkConnectionLost: return "no network"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
             .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot: return "TLS failed"
        default: return "network error \(urlError.code.rawValue)"
        }
    }
}
