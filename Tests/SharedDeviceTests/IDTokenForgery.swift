import Foundation
import IdentityClient
import IdentityTestSupport
import JWTKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Re-signs the provider's ID tokens: with the provider's own RSA key (read from its directory) and
/// changed claims — a token whose signature verifies but whose issuer, audience, expiry or nonce is
/// wrong — or with another key under the provider's key id (a bad signature).
struct IDTokenForger: Sendable {
    enum Key: Sendable { case provider, stranger }

    let providerKey: JWTKit.Insecure.RSA.PrivateKey
    static let strangerKey = try! JWTKit.Insecure.RSA.PrivateKey(pem: strangerPEM())

    init(provider: LocalIdentityProvider) throws {
        let pem = try String(contentsOf: provider.directory.appendingPathComponent("rsa-private.pem"), encoding: .utf8)
        providerKey = try JWTKit.Insecure.RSA.PrivateKey(pem: pem)
    }

    /// `jwt` with `changes` applied to its claims (`nil` removes a claim), signed by `key` under the
    /// original `kid`.
    func forge(_ jwt: String, _ changes: [String: ClaimValue?], key: Key = .provider) async throws -> String {
        let parts = jwt.split(separator: ".").map(String.init)
        guard parts.count == 3, let headerJSON = Base64URL.decode(parts[0]), let claimsJSON = Base64URL.decode(parts[1])
        else {
            throw NotACompactJWS(token: jwt)
        }
        let header = try JSONSerialization.jsonObject(with: headerJSON) as! [String: Any]
        var claims = try JSONDecoder().decode(TestClaims.self, from: claimsJSON)
        for (name, value) in changes { claims.values[name] = value }
        let keys = JWTKeyCollection()
        await keys.add(rsa: key == .provider ? providerKey : Self.strangerKey, digestAlgorithm: .sha256)
        return try await keys.sign(claims, kid: (header["kid"] as? String).map { JWKIdentifier(string: $0) })
    }

    /// The token to re-sign is not three base64url parts.
    struct NotACompactJWS: Error { let token: String }

    /// A 2048-bit RSA key made once with openssl (not the provider's).
    static func strangerPEM() -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("stranger-rsa-\(getpid()).pem").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["genrsa", "-out", path, "2048"]
        process.standardError = FileHandle.nullDevice
        try! process.run()
        process.waitUntilExit()
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try! String(contentsOfFile: path, encoding: .utf8)
    }
}

/// The real transport, with the token endpoint's `id_token` replaced by `rewrite` (a man in the middle
/// or a confused provider). Every other request and response passes untouched.
struct IDTokenRewritingTransport: HTTPTransport {
    let rewrite: @Sendable (String) async throws -> String
    private let base = CurlTransport()

    init(rewrite: @escaping @Sendable (String) async throws -> String) {
        self.rewrite = rewrite
    }

    func send(_ request: HTTPRequest) async throws(IdentityError) -> HTTPResponse {
        var response = try await base.send(request)
        guard request.url.path.hasSuffix("/token"), response.isSuccess,
            var object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
            let idToken = object["id_token"] as? String
        else { return response }
        do {
            object["id_token"] = try await rewrite(idToken)
            response.body = try JSONSerialization.data(withJSONObject: object)
        } catch {
            throw IdentityError(.invalidResponse, "test rewrite failed: \(error)")
        }
        return response
    }
}
