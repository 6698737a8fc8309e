public import Foundation
public import IdentityClient
import Synchronization

/// A stand-in for an authority we cannot reach (Microsoft Entra ID, Azure AD B2C): answers each request
/// from canned responses keyed by the URL path, and records every request it was sent.
///
/// Per path, queued responses are answered first, in order; when a path's queue is empty its standing
/// response (if any) answers. A request to a path with neither gets a 404 and is still recorded.
public final class ScriptedTransport: HTTPTransport {
    /// A request as the authority would have seen it, with its form body decoded.
    public struct Recorded: Sendable {
        public var method: String
        public var url: URL
        public var headers: [String: String]
        /// The `application/x-www-form-urlencoded` body, decoded (first value wins); empty for a GET.
        public var form: [String: String]

        public var path: String { url.path }
        /// The `scope` field split on spaces.
        public var scopes: [String] { form["scope"]?.split(separator: " ").map(String.init) ?? [] }
    }

    private struct State {
        var queued: [String: [HTTPResponse]] = [:]
        var standing: [String: HTTPResponse] = [:]
        public var requests: [Recorded] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Answers the next requests to `path` with `responses`, one each, in order.
    public func enqueue(_ path: String, _ responses: HTTPResponse...) {
        state.withLock { $0.queued[path, default: []].append(contentsOf: responses) }
    }

    /// Answers every request to `path` with `response` once its queue is empty.
    public func always(_ path: String, _ response: HTTPResponse) {
        state.withLock { $0.standing[path] = response }
    }

    /// Every request sent so far, in order.
    public var requests: [Recorded] { state.withLock { $0.requests } }

    /// The requests sent to `path`.
    public func requests(to path: String) -> [Recorded] { requests.filter { $0.path == path } }

    /// The responses still queued for `path` (a test checks the script was used up).
    public func pending(_ path: String) -> Int { state.withLock { $0.queued[path]?.count ?? 0 } }

    public func send(_ request: HTTPRequest) async throws(IdentityError) -> HTTPResponse {
        let form = request.body.map { Self.decodeForm(String(decoding: $0, as: UTF8.self)) } ?? [:]
        let recorded = Recorded(method: request.method, url: request.url, headers: request.headers, form: form)
        return state.withLock { state in
            state.requests.append(recorded)
            let path = request.url.path
            if var queue = state.queued[path], !queue.isEmpty {
                let response = queue.removeFirst()
                state.queued[path] = queue
                return response
            }
            return state.standing[path]
                ?? .json(["error": "not_found", "error_description": "no scripted response for \(path)"], status: 404)
        }
    }

    /// Decodes a form body independently of the client's encoder: `+` is a space, then percent-decoding.
    public static func decodeForm(_ body: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String {
                String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(part)
            }
            let name = decode(parts[0])
            if fields[name] == nil { fields[name] = parts.count > 1 ? decode(parts[1]) : "" }
        }
        return fields
    }
}

extension HTTPResponse {
    /// A JSON response with `object` as its body.
    public static func json(_ object: [String: Any], status: Int = 200) -> HTTPResponse {
        HTTPResponse(
            status: status,
            headers: ["content-type": "application/json; charset=utf-8"],
            body: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        )
    }

    /// A JSON response with exactly these bytes as its body.
    public static func json(body: Data, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["content-type": "application/json; charset=utf-8"], body: body)
    }
}
