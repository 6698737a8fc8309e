import Foundation
import IdentityClient
import KeychainStore
import SharedDevice
import Synchronization
import Testing

/// Fixtures for the token-cache tests: a temporary store, a clock moved by hand, app identities and a
/// known token response built from literal `client_info` and `id_token` values.
enum CacheFixture {
    /// A fresh state directory under /tmp, removed when the value is deinitialised.
    final class Directory: Sendable {
        let url: URL

        init() {
            url = FileManager.default.temporaryDirectory.appendingPathComponent(
                "token-cache-test-\(UUID().uuidString)",
                isDirectory: true
            )
            try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        }

        deinit { try? FileManager.default.removeItem(at: url) }
    }

    /// A clock that tests move by hand; starts at 1_800_000_000 (2027-01-15T08:00:00Z).
    final class Clock: Sendable {
        private let now = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var date: Date { now.withLock { $0 } }
        func advance(by seconds: TimeInterval) { now.withLock { $0 += seconds } }
        var function: @Sendable () -> Date { { [self] in date } }
    }

    /// A store in a temporary directory with fast commits and `clock`.
    struct Store {
        let directory = Directory()
        let clock = Clock()
        let store: KeychainStore

        init() throws {
            store = try KeychainStore(
                directory: directory.url,
                options: StoreOptions(synchronous: .normal, clock: clock.function)
            )
        }
    }

    static let privateScannerGroup = "com.contoso.scanner"
    /// Entitled to MSAL's shared group and its own private group.
    static let scanner = try! AppIdentity(
        appID: "com.contoso.scanner",
        accessGroups: [AccessGroup.adalCache, privateScannerGroup]
    )
    /// Entitled to MSAL's shared group and its own private group.
    static let timeclock = try! AppIdentity(
        appID: "com.contoso.timeclock",
        accessGroups: [AccessGroup.adalCache, "com.contoso.timeclock"]
    )

    static let clientID = "9a1f3c2e-6b7d-4e8f-a0b1-c2d3e4f5a6b7"
    static let otherFamilyClientID = "4e5d6c7b-8a9f-4b0c-9d1e-2f3a4b5c6d7e"
    static let environment = "login.microsoftonline.com"
    static let uid = "5f7c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"
    static let utid = "c0ffee00-1234-4abc-9def-0123456789ab"
    static let homeAccountID = "\(uid).\(utid)"
    /// base64url(`{"uid":"5f7c1d2e-…","utid":"c0ffee00-…"}`).
    static let clientInfo =
        "eyJ1aWQiOiI1ZjdjMWQyZS0zYTRiLTRjNWQtOGU5Zi0wYTFiMmMzZDRlNWYiLCJ1dGlkIjoiYzBmZmVlMDAtMTIzNC00YWJjLTlkZWYtMDEyMzQ1Njc4OWFiIn0"
    /// An unsigned JWT with aud, iss, name `Ada Worker`, oid = uid, preferred_username `ada@contoso.example`,
    /// sub `Ab3dEf9hIj`, tid = utid, ver 2.0.
    static let idToken =
        "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJhdWQiOiI5YTFmM2MyZS02YjdkLTRlOGYtYTBiMS1jMmQzZTRmNWE2YjciLCJpc3MiOiJodHRwczovL2xvZ2luLm1pY3Jvc29mdG9ubGluZS5jb20vYzBmZmVlMDAtMTIzNC00YWJjLTlkZWYtMDEyMzQ1Njc4OWFiL3YyLjAiLCJuYW1lIjoiQWRhIFdvcmtlciIsIm9pZCI6IjVmN2MxZDJlLTNhNGItNGM1ZC04ZTlmLTBhMWIyYzNkNGU1ZiIsInByZWZlcnJlZF91c2VybmFtZSI6ImFkYUBjb250b3NvLmV4YW1wbGUiLCJzdWIiOiJBYjNkRWY5aElqIiwidGlkIjoiYzBmZmVlMDAtMTIzNC00YWJjLTlkZWYtMDEyMzQ1Njc4OWFiIiwidmVyIjoiMi4wIn0."

    /// The body of a Microsoft identity platform token response for the worker, as the endpoint sends it.
    static let responseJSON = """
        {"token_type":"Bearer","scope":"User.Read openid profile offline_access Mail.Read","expires_in":3599,\
        "ext_expires_in":7199,"refresh_in":1800,"access_token":"at-secret-1","refresh_token":"rt-secret-1",\
        "id_token":"\(idToken)","client_info":"\(clientInfo)"}
        """

    static func response(foci: String? = nil) throws -> TokenResponse {
        var response = try TokenResponse.decode(Data(responseJSON.utf8))
        response.familyID = foci
        return response
    }

    static func context(
        clientID: String = clientID,
        scopes: [String] = ["User.Read", "Mail.Read"]
    ) -> TokenRequestContext {
        TokenRequestContext(
            clientID: clientID,
            environment: environment,
            realm: "organizations",
            requestedScopes: scopes
        )
    }

    /// An unsigned JWT whose payload is `claims` (for responses from non-Microsoft providers).
    static func jwt(_ claims: [String: String]) throws -> String {
        let payload = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        return "eyJhbGciOiJub25lIn0.\(Base64URL.encode(payload)).sig"
    }

    /// The item secrets of the caller's store, as text, keyed by service.
    static func itemJSON(_ store: KeychainStore, as caller: AppIdentity, type: UInt32) throws -> [String: String] {
        var result: [String: String] = [:]
        for item in (try? store.findAll(ItemQuery(type: type), as: caller)) ?? [] {
            result[item.service] = String(decoding: item.secret, as: UTF8.self)
        }
        return result
    }

    /// The error `body` throws, or `nil` if it succeeds. (Swift 6.3.1 crashes compiling
    /// `catch let error as T` after a typed-throws call, so tests inspect the error afterwards.)
    static func caughtError<T>(_ body: () throws -> T) -> (any Error)? {
        do {
            _ = try body()
            return nil
        } catch {
            return error
        }
    }
}
