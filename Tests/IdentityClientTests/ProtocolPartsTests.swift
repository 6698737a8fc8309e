import Foundation
import Testing

@testable import IdentityClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The OAuth plumbing the flows share: PKCE, form encoding, error mapping, the loopback redirect.
@Suite struct ProtocolPartsTests {
    @Test func pkceS256MatchesRFC7636AppendixB() {
        let pkce = PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(pkce.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    }

    @Test func freshVerifiersAreLongRandomAndURLSafe() {
        let first = PKCE()
        let second = PKCE()
        #expect(first.verifier != second.verifier)
        #expect(first.verifier.count == 43)  // 32 bytes, unpadded base64url: RFC 7636 §4.1 minimum
        #expect(first.verifier.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
    }

    @Test func formEncodingEscapesReservedCharactersAndRoundTrips() {
        let fields = [
            ("scope", "openid profile User.Read"), ("redirect_uri", "http://127.0.0.1:5000/"), ("x", "a&b=c+d/é"),
        ]
        let encoded = FormEncoding.encode(fields)
        #expect(
            encoded
                == "scope=openid+profile+User.Read&redirect_uri=http%3A%2F%2F127.0.0.1%3A5000%2F&x=a%26b%3Dc%2Bd%2F%C3%A9"
        )
        let decoded = FormEncoding.decode(encoded)
        for (name, value) in fields { #expect(decoded[name] == value) }
    }

    /// Microsoft's documented token error body (AADSTS70008 expired refresh token).
    @Test func invalidGrantBecomesInteractionRequiredWithTheServerDescription() {
        let body = Data(
            """
            {"error":"invalid_grant","error_description":"AADSTS70008: The provided authorization code or refresh token has expired due to inactivity.\\r\\nTrace ID: 1\\r\\nCorrelation ID: 2","error_codes":[70008],"timestamp":"2026-11-22 03:00:00Z","trace_id":"1","correlation_id":"2","suberror":"bad_token"}
            """.utf8
        )
        let error = OAuthErrorResponse.identityError(
            for: HTTPResponse(status: 400, body: body),
            endpoint: "token endpoint"
        )
        #expect(error.code == .interactionRequired)
        #expect(error.msalErrorCode == -50002)
        #expect(error.oauthError == "invalid_grant")
        #expect(error.serverDescription?.hasPrefix("AADSTS70008") == true)
    }

    @Test func interactionRequiredAndConsentRequiredAreInteractionRequired() {
        for code in ["interaction_required", "consent_required", "login_required"] {
            let body = Data(#"{"error":"\#(code)"}"#.utf8)
            #expect(
                OAuthErrorResponse.identityError(for: HTTPResponse(status: 400, body: body), endpoint: "t").code
                    == .interactionRequired
            )
        }
    }

    @Test func otherOAuthErrorsAreServerErrorsKeepingTheDescription() {
        let body = Data(#"{"error":"invalid_scope","error_description":"scope Files.ReadWrite is not allowed"}"#.utf8)
        let error = OAuthErrorResponse.identityError(
            for: HTTPResponse(status: 400, body: body),
            endpoint: "token endpoint"
        )
        #expect(error.code == .serverError)
        #expect(error.msalErrorCode == -50006)
        #expect(error.description.contains("scope Files.ReadWrite is not allowed"))
    }

    @Test func aNonOAuthFailureNamesTheStatus() {
        let error = OAuthErrorResponse.identityError(
            for: HTTPResponse(status: 502, body: Data("<html>bad gateway</html>".utf8)),
            endpoint: "token endpoint"
        )
        #expect(error.code == .serverError)
        #expect(error.httpStatus == 502)
        #expect(error.description.contains("HTTP 502"))
    }

    @Test func unreachableAuthorityIsAClearErrorWithoutThePath() async {
        let transport = CurlTransport(timeout: 5)
        let url = URL(string: "http://127.0.0.1:9/api/oidc/token?code=secret-code")!
        let error = await caught { () async throws(IdentityError) in _ = try await transport.send(HTTPRequest(url: url))
        }
        #expect(error?.code == .authorityUnreachable)
        #expect(error?.message.contains("127.0.0.1:9") == true)
        #expect(error?.message.contains("secret-code") == false)
    }

    @Test func loopbackListenerReturnsTheRedirectQueryAndAnswersThe404sFirst() async throws {
        let listener = try LoopbackRedirectListener()
        #expect(listener.port > 0)
        let base = "http://127.0.0.1:\(listener.port)"
        // Bounds for a hang only: a loaded machine can take many seconds for a loopback request.
        let waiting = Task { try await listener.waitForRedirect(path: "/", deadline: Date().addingTimeInterval(600)) }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 600
        let session = URLSession(configuration: configuration)
        let (_, favicon) = try await session.data(from: URL(string: "\(base)/favicon.ico")!)
        #expect((favicon as? HTTPURLResponse)?.statusCode == 404)
        let (page, redirect) = try await session.data(from: URL(string: "\(base)/?code=abc%2F1&state=xyz")!)
        #expect((redirect as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: page, as: UTF8.self).contains("close this window"))
        let fields = try await waiting.value
        #expect(fields == ["code": "abc/1", "state": "xyz"])
    }

    @Test func aFixedRedirectPortBindsAgainRightAfterASignInOnIt() async throws {
        // The listener answers the browser and closes first, so its side of that connection waits in TIME_WAIT
        // for a minute: a second sign-in on the same registered redirect URI must still bind the port.
        let first = try LoopbackRedirectListener()
        let port = first.port
        let waiting = Task {
            try await first.waitForRedirect(path: "/callback", deadline: Date().addingTimeInterval(600))
        }
        // A browser that reads the answer to its end and closes after the listener did.
        let answer = try Self.getReadingToTheEnd(port: port, path: "/callback?code=c&state=s")
        #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
        _ = try await waiting.value
        first.shutDown()
        let second = try LoopbackRedirectListener(port: port)
        #expect(second.port == port)
    }

    /// `GET path` to `127.0.0.1:port` on a plain socket, read until the server closes, then closed.
    static func getReadingToTheEnd(port: UInt16, path: String) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0, "connect: errno \(errno)")
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
        try #require(write(fd, request, request.count) == request.count)
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            answer += buffer[..<count]
        }
        return String(decoding: answer, as: UTF8.self)
    }

    @Test func aTakenLoopbackPortIsUnsupportedNamingTheErrnoOfTheFailedCall() throws {
        let first = try LoopbackRedirectListener()
        do {
            let second = try LoopbackRedirectListener(port: first.port)
            Issue.record("a second listener bound the taken port \(second.port)")
        } catch {
            #expect(error.code == .unsupported)
            #expect(error.message.contains("127.0.0.1:\(first.port)"), "\(error.message)")
            #expect(
                error.message.contains("errno \(EADDRINUSE)"),
                "the errno of bind, not of the close after it: \(error.message)"
            )
        }
    }

    @Test func loopbackListenerStopsWhenCanceled() async throws {
        let listener = try LoopbackRedirectListener()
        let waiting = Task { () async throws(IdentityError) -> [String: String] in
            try await listener.waitForRedirect(path: "/", deadline: Date().addingTimeInterval(60))
        }
        try await Task.sleep(for: .milliseconds(100))
        waiting.cancel()
        let result = await waiting.result
        guard case .failure(let error) = result else {
            Issue.record("a canceled wait returned fields")
            return
        }
        #expect((error as? IdentityError)?.code == .userCanceled)
    }
}

/// The error a throwing async body threw, or `nil`.
func caught<T>(_ body: () async throws(IdentityError) -> T) async -> IdentityError? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}
