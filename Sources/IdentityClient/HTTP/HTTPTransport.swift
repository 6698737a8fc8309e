public import Foundation

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
        HTTPRequest(
            method: "POST",
            url: url,
            headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
            body: Data(FormEncoding.encode(fields).utf8)
        )
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
