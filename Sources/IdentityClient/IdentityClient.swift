public import Foundation
public import Logging

/// OAuth 2.0 / OpenID Connect for one app registration (client id) at one authority: discovery, the
/// device authorization grant, the authorization code grant with PKCE on a loopback redirect, the
/// refresh token grant and ID-token validation. The network side of MSAL's `MSALPublicClientApplication`.
///
/// It keeps no tokens: every call returns a `TokenGrant` (or throws) and the caller decides what to
/// cache. A failed call returns nothing to cache. Discovery documents and signing keys are kept in a
/// `DiscoveryCache` (the client's own, or one its caller shares between clients).
///
/// Each concern lives in its own file: discovery and keys (`IdentityClient+Discovery`), the token
/// endpoint (`+TokenEndpoint`), the device code grant (`+DeviceCodeGrant`), the browser grant
/// (`+BrowserGrant`), the refresh grant (`+RefreshGrant`), userinfo (`+UserInfo`) and the end-session
/// URL (`+EndSession`).
///
/// ```swift
/// let client = IdentityClient(clientID: "kiosk-apps", authority: try Authority("http://127.0.0.1:4593/api/oidc"))
/// let session = try await client.startDeviceCode(scopes: ["User.Read"])
/// print(session.message)                       // To sign in, open … and enter the code …
/// let grant = try await client.completeDeviceCode(session)
/// ```
public final class IdentityClient: Sendable {
    /// The app registration's client id.
    public let clientID: String
    /// The client secret of a confidential client (RFC 6749 §2.3.1, sent as `client_secret` in the body of
    /// every token-endpoint and device-authorization request), for providers that issue tokens of some
    /// grants (the password grant, at glewlwyd) only to a client that authenticates. Never logged.
    let clientSecret: String?
    /// Where the app signs in.
    public let authority: Authority
    /// The way to the network.
    public let transport: any HTTPTransport
    /// Seconds of clock difference tolerated when checking ID-token times.
    public let allowedClockSkew: TimeInterval
    /// The authority's discovery documents and signing keys.
    public let discoveryCache: DiscoveryCache
    let now: @Sendable () -> Date
    let sleep: @Sendable (TimeInterval) async throws -> Void
    /// Debug and trace events of the flows; never a token, a code, a verifier or a header.
    let logger: Logger

    /// A client for `clientID` at `authority`.
    /// - Parameters:
    ///   - transport: the way to the network (tests pass a scripted one).
    ///   - allowedClockSkew: seconds of clock difference tolerated in ID-token times (MSAL: 5 minutes).
    ///   - now: the clock (tests pass a fake one).
    ///   - sleep: waits between device-code polls (tests pass a fake one); must throw when canceled.
    ///   - discoveryCache: where discovery documents and keys are kept; a fresh one by default. Pass one
    ///     cache to every client of an app so that the authority is discovered once a day.
    ///   - logger: where the flows' debug and trace events go; the task-local logger by default.
    public init(
        clientID: String,
        clientSecret: String? = nil,
        authority: Authority,
        transport: any HTTPTransport = CurlTransport(),
        allowedClockSkew: TimeInterval = 300,
        now: @escaping @Sendable () -> Date = Date.init,
        sleep: @escaping @Sendable (TimeInterval) async throws -> Void = { try await Task.sleep(for: .seconds($0)) },
        discoveryCache: DiscoveryCache = DiscoveryCache(),
        logger: Logger = Logger.current
    ) {
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.authority = authority
        self.transport = transport
        self.allowedClockSkew = allowedClockSkew
        self.now = now
        self.sleep = sleep
        self.discoveryCache = discoveryCache
        var logger = logger
        logger[metadataKey: "oidc.authority"] = "\(authority.url.absoluteString)"
        logger[metadataKey: "oidc.client_id"] = "\(clientID)"
        self.logger = logger
    }
}

extension IdentityClient {
    /// The client's fields of a token-endpoint or device-authorization request: `client_id`, and
    /// `client_secret` for a confidential client.
    var clientFields: [(String, String)] {
        [("client_id", clientID)] + (clientSecret.map { [("client_secret", $0)] } ?? [])
    }
}
