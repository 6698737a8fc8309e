import Foundation
import IdentityClient
import ProcessTestSupport
import TestTags
import Testing

/// What `devicectl` refuses from the real local provider (glewlwyd on 4599, see `IdentityCLITests`), and
/// that a refusal leaves the device exactly as it was: an ID token that fails validation (exit 52) and a
/// refresh that grants fewer scopes than asked for (exit 50).
@Suite(.tags(.integration, .needsIdentityProvider))
struct IdentityRejectionCLITests {
    static let scanner = IdentityCLITests.scanner
    static let port = UInt16(IdentityCLITests.port)

    // MARK: - ID token rejected

    /// How the provider's published keys differ from the key its ID tokens are signed with.
    enum KeyChange: String, CaseIterable, Sendable {
        /// The provider "rotated" to a new key: a new `kid`, and the token's key is gone.
        case rotated
        /// Another key under the token's own `kid`: its signature does not verify.
        case replaced

        /// What `devicectl` says the ID token failed.
        var refusal: String {
            switch self {
            case .rotated: "which is not in the authority's key set"
            case .replaced: "signature does not verify"
            }
        }
    }

    /// The ID token comes from the real provider through the real binary, but the key set `devicectl`
    /// fetches from `jwks_uri` holds another RSA key, served by a loopback proxy on the way to the provider
    /// (everything else passes through untouched). The sign-in must fail with exit 52, cache nothing, and
    /// log no sign-in.
    @Test(arguments: KeyChange.allCases)
    func aSignInWhoseIDTokenFailsValidationIsExit52AndCachesNothing(_ change: KeyChange) async throws {
        let provider = try await IdentityCLITests.Provider.shared()
        let cli = IdentityCLITests.Device()
        defer { cli.cleanUp() }
        try await cli.provision(policy: provider.kioskPolicy(issuer: provider.issuer, in: cli.runner))

        let issuer = try #require(URL(string: provider.issuer))
        let discovery = try #require(
            try JSONSerialization.jsonObject(
                with: LoopbackProxy.get(issuer.path + "/.well-known/openid-configuration", port: Self.port)
            ) as? [String: Any]
        )
        let jwksURI = try #require((discovery["jwks_uri"] as? String).flatMap(URL.init(string:)), "\(discovery)")
        #expect(jwksURI.port == Int(Self.port), "the provider publishes its keys elsewhere: \(jwksURI)")
        let published = try LoopbackProxy.get(jwksURI.path, port: Self.port)
        let forged = try await KeySetForgery.replacingRSAKeys(of: published, rotate: change == .rotated)
        let proxy = try LoopbackProxy(upstreamPort: Self.port, replacements: [jwksURI.path: forged])
        defer { proxy.stop() }

        let itemsBefore = try await sqlite3(cli.runner.databasePath, "SELECT count(*) FROM items")
        let eventsBefore = try await sqlite3(cli.runner.databasePath, "SELECT count(*) FROM audit_events")
        let signIn = try await cli.signInByDeviceCode(
            app: Self.scanner,
            as: "worker1",
            environment: ["http_proxy": proxy.url, "no_proxy": "", "NO_PROXY": ""]
        )
        // The token request went through the proxy, and the keys came from it.
        #expect(proxy.requests.contains { $0.hasPrefix("POST ") && $0.hasSuffix("/token") }, "\(proxy.requests)")
        #expect(
            proxy.requests.contains("GET \(jwksURI.path)"),
            "devicectl never fetched the keys through the proxy: \(proxy.requests)"
        )
        #expect(!signIn.code.isEmpty, "no device code was shown: \(signIn.result.stdout) \(signIn.result.stderr)")

        #expect(
            signIn.result.status == 52,
            "\(change): signin exited \(signIn.result.status): \(signIn.result.stdout) \(signIn.result.stderr)"
        )
        #expect(
            signIn.result.stderr.contains("ID token") && signIn.result.stderr.contains(change.refusal),
            "\(signIn.result.stderr)"
        )
        #expect(!signIn.result.stdout.contains("signed in:"), "\(signIn.result.stdout)")

        // Nothing cached, nobody signed in, nothing logged.
        #expect(
            try await sqlite3(cli.runner.databasePath, "SELECT count(*) FROM items") == itemsBefore,
            "the rejected sign-in stored items"
        )
        #expect(
            try await sqlite3(cli.runner.databasePath, "SELECT count(*) FROM audit_events") == eventsBefore,
            "the rejected sign-in was logged"
        )
        let account = try #require(try await cli.json(["account", "--app", Self.scanner, "--json"]) as? [String: Any])
        #expect(account["current"] is NSNull, "\(account)")
        #expect(try await cli.signInEvents().isEmpty)
        let token = try await cli.run(["token", "--app", Self.scanner, "--scopes", "User.Read"])
        #expect(token.status == 49, "\(token.stdout) \(token.stderr)")
    }

    // MARK: - Refresh granting fewer scopes

    /// glewlwyd answers a refresh with the scopes of the original grant, whatever the request asks for. A
    /// token call for a scope the sign-in did not get (`email`: it exists at the provider, but the policy's
    /// sign-in does not ask for it) therefore gets a response without it: MSAL's declined-scopes rule makes
    /// that exit 50, and nothing from the response is cached.
    @Test func aRefreshGrantingFewerScopesThanAskedIsExit50AndChangesNothing() async throws {
        let provider = try await IdentityCLITests.Provider.shared()
        let cli = IdentityCLITests.Device()
        defer { cli.cleanUp() }
        try await cli.provision(policy: provider.kioskPolicy(issuer: provider.issuer, in: cli.runner))
        let ana = try await cli.signInByDeviceCode(app: Self.scanner, as: "worker1")
        try #require(
            ana.result.status == 0,
            "signin exited \(ana.result.status): \(ana.result.stdout) \(ana.result.stderr)"
        )
        let granted = ana.result.stdout.split(separator: "\n").first { $0.hasPrefix("scopes: ") }.map(String.init) ?? ""
        try #require(granted.contains("User.Read") && !granted.contains("email"), "the sign-in was granted \(granted)")

        // Every item row (a rewrite seals with a fresh nonce), the audit log and the exported cache.
        let rowsBefore = try await Self.itemRows(cli)
        let eventsBefore = try await sqlite3(cli.runner.databasePath, "SELECT count(*) FROM audit_events")
        let cacheBefore = try await Self.exportedAccessTokens(cli)
        try #require(!cacheBefore.isEmpty)

        let refused = try await cli.run(["token", "--app", Self.scanner, "--scopes", "email"])
        #expect(refused.status == 50, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stderr.contains("did not grant email"), "not the declined-scopes refusal: \(refused.stderr)")
        #expect(refused.stdout.isEmpty, "\(refused.stdout)")

        #expect(try await Self.itemRows(cli) == rowsBefore, "the refused refresh changed the store")
        #expect(try await sqlite3(cli.runner.databasePath, "SELECT count(*) FROM audit_events") == eventsBefore)
        #expect(
            try await Self.exportedAccessTokens(cli) == cacheBefore,
            "the refused refresh changed the cached access tokens"
        )
        // Ana is still signed in and the tokens she was granted still answer from the cache.
        let cached = try #require(
            try await cli.json(["token", "--app", Self.scanner, "--scopes", "User.Read", "--json"]) as? [String: Any]
        )
        #expect(cached["source"] as? String == "cache", "\(cached)")
        #expect((try await cli.json(["audit", "--json", "--type", "account.signed_out"]) as? [Any])?.isEmpty == true)
    }

    /// Every item row as `id|nonce|ciphertext` (hex).
    static func itemRows(_ cli: IdentityCLITests.Device) async throws -> String {
        try await sqlite3(
            cli.runner.databasePath,
            "SELECT id || '|' || hex(nonce) || '|' || hex(ciphertext) FROM items ORDER BY id"
        )
    }

    /// The scanner's cached access tokens (`cache export`): entry key → target, secret and expiry.
    static func exportedAccessTokens(_ cli: IdentityCLITests.Device) async throws -> [String: [String]] {
        let file = cli.runner.filesDirectory.appendingPathComponent("export-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let export = try await cli.run(["cache", "export", "--app", scanner, "--output", file])
        try #require(export.status == 0, "cache export exited \(export.status): \(export.stderr)")
        let cache = try #require(try parseJSON(String(contentsOfFile: file, encoding: .utf8)) as? [String: Any])
        let tokens = (cache["AccessToken"] as? [String: [String: Any]]) ?? [:]
        return tokens.mapValues { entry in
            ["target", "secret", "expires_on", "cached_at"].map { entry[$0] as? String ?? "-" }
        }
    }
}

/// A JSON Web Key Set like the provider's, with every RSA key replaced by another RSA key made with openssl.
enum KeySetForgery {
    /// The modulus of a 2048-bit RSA key that is not the provider's, made once per test run.
    static let strangerModulus = Task<Result<Data, ProxyError>, Never> {
        do {
            let key = try await DevicectlRunner.execute(URL(fileURLWithPath: "/usr/bin/openssl"), ["genrsa", "2048"])
            guard key.status == 0 else { return .failure(ProxyError("openssl genrsa: \(key.stderr)")) }
            let modulus = try await DevicectlRunner.execute(
                URL(fileURLWithPath: "/usr/bin/openssl"),
                ["rsa", "-noout", "-modulus"],
                stdin: key.stdout
            )
            let hex = modulus.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            guard modulus.status == 0, hex.hasPrefix("Modulus="),
                let bytes = Data(hex: String(hex.dropFirst("Modulus=".count)))
            else {
                return .failure(ProxyError("openssl rsa -modulus: \(modulus.stdout) \(modulus.stderr)"))
            }
            return .success(bytes)
        } catch {
            return .failure(ProxyError("cannot run openssl: \(error)"))
        }
    }

    /// `keySet` with each RSA key's modulus replaced by `strangerModulus` (exponent 65537) and its
    /// certificate fields dropped; with `rotate`, under a new `kid` too.
    static func replacingRSAKeys(of keySet: Data, rotate: Bool) async throws -> Data {
        var object = try #require(try JSONSerialization.jsonObject(with: keySet) as? [String: Any])
        let keys = try #require(object["keys"] as? [[String: Any]])
        let modulus = try await strangerModulus.value.get()
        var replaced = 0
        object["keys"] = keys.map { key -> [String: Any] in
            guard key["kty"] as? String == "RSA" else { return key }
            replaced += 1
            var key = key.filter { !["x5c", "x5t", "x5t#S256"].contains($0.key) }
            key["n"] = Base64URL.encode(modulus)
            key["e"] = "AQAB"
            if rotate { key["kid"] = "rotated-\(UUID().uuidString.prefix(8))" }
            return key
        }
        try #require(replaced > 0, "the provider's key set has no RSA key: \(String(decoding: keySet, as: UTF8.self))")
        return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }
}

extension Data {
    /// Bytes from hexadecimal text; `nil` for anything else.
    init?(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) ?? hex.endIndex
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }
}
