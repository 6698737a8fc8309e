import Foundation
import Logging

// Discovery (OpenID Connect Discovery 1.0) and the authority's signing keys (`jwks_uri`), kept in the
// client's `DiscoveryCache`; ID-token validation against them (OpenID Connect Core 1.0 §3.1.3.7).
extension IdentityClient {
    /// The authority's discovery document (MSAL's authority metadata), fetched once and kept in the
    /// client's `DiscoveryCache` for its lifetime (a day).
    /// - Throws: `invalidAuthority` when the authority publishes none; `invalidResponse`; `authorityUnreachable`.
    public func configuration() async throws(IdentityError) -> OpenIDConfiguration {
        let url = authority.openIDConfigurationURL
        if let cached = discoveryCache.configuration(for: url, now: now()) {
            logger.trace("discovery document from the cache", metadata: ["oidc.discovery_url": LogFields.endpoint(url)])
            return cached
        }
        let response = try await transport.send(HTTPRequest(url: url, headers: ["Accept": "application/json"]))
        guard response.isSuccess else {
            logger.debug(
                "discovery failed",
                metadata: ["oidc.discovery_url": LogFields.endpoint(url), "http.status": "\(response.status)"]
            )
            throw IdentityError(
                .invalidAuthority,
                "the authority has no OpenID configuration at \(url.absoluteString) (HTTP \(response.status)); check the authority URL",
                httpStatus: response.status
            )
        }
        let configuration = try OpenIDConfiguration.decode(response.body, from: url)
        discoveryCache.store(configuration, for: url, now: now())
        logger.debug(
            "discovery document fetched and cached",
            metadata: [
                "oidc.discovery_url": LogFields.endpoint(url),
                "oidc.issuer": "\(configuration.issuer)",
                "oidc.device_code": "\(configuration.deviceAuthorizationEndpoint != nil)",
                "cache.lifetime_s": "\(Int(discoveryCache.lifetime))",
            ]
        )
        return configuration
    }

    /// The validator for the authority's signing keys, from the cache unless `refetch` (done once when
    /// a token names a key the cached set lacks: the provider rotated its keys).
    /// - Throws: `serverError` when the key set is unavailable (non-2xx); `unsupported` when it holds no
    ///   RS256 or ES256 key; `invalidResponse`.
    func validator(
        for configuration: OpenIDConfiguration,
        refetch: Bool = false
    ) async throws(IdentityError) -> IDTokenValidator {
        let jwksURI = configuration.jwksURI
        if !refetch, let cached = discoveryCache.validator(for: jwksURI, now: now()) {
            logger.trace("signing keys from the cache", metadata: ["oidc.jwks_uri": LogFields.endpoint(jwksURI)])
            return cached
        }
        let response = try await transport.send(HTTPRequest(url: jwksURI, headers: ["Accept": "application/json"]))
        guard response.isSuccess else {
            logger.debug(
                "signing key set unavailable",
                metadata: ["oidc.jwks_uri": LogFields.endpoint(jwksURI), "http.status": "\(response.status)"]
            )
            throw IdentityError(
                .serverError,
                "the identity provider's signing key set is unavailable: its jwks_uri (\(jwksURI.absoluteString)) answered HTTP \(response.status), so the ID token cannot be verified and nothing was cached; the provider must publish its RS256 or ES256 public keys there (public clients verify ID tokens with those only) — check its key configuration, or try again later if it is restarting",
                httpStatus: response.status
            )
        }
        let validator: IDTokenValidator
        do {
            validator = try IDTokenValidator(jwksJSON: response.body)
        } catch {
            logger.debug(
                "signing key set unusable",
                metadata: LogFields.failure(error).merging(["oidc.jwks_uri": LogFields.endpoint(jwksURI)]) { $1 }
            )
            throw error
        }
        discoveryCache.store(validator, for: jwksURI, now: now())
        logger.debug(
            refetch ? "signing keys fetched again for an unknown key id" : "signing keys fetched and cached",
            metadata: [
                "oidc.jwks_uri": LogFields.endpoint(jwksURI),
                "oidc.key_ids": .array(validator.keyIDs.map { .string($0) }),
            ]
        )
        return validator
    }

    /// Validates an ID token against the authority's keys, issuer, this client id, the clock and `nonce`
    /// (what every sign-in does before caching anything; public for callers that hold an ID token, such as
    /// the token benchmark);
    /// a token naming a key the cached set lacks makes the client fetch the key set again, once.
    /// - Throws: `invalidIDToken` naming the failed check; the key set's errors (see `validator(for:refetch:)`).
    public func validateIDToken(_ jwt: String, nonce: String?) async throws(IdentityError) -> ValidatedIDToken {
        let configuration = try await configuration()
        var validator = try await validator(for: configuration)
        let keyID = IDTokenValidator.keyID(of: jwt)
        if let keyID, !validator.hasKey(id: keyID) {
            logger.debug(
                "the ID token names a key the cached set lacks; fetching the key set again",
                metadata: ["oidc.kid": "\(keyID)"]
            )
            validator = try await self.validator(for: configuration, refetch: true)
        }
        let expectations = IDTokenExpectations(
            authority: authority,
            metadataIssuer: configuration.issuer,
            clientID: clientID,
            nonce: nonce,
            now: now(),
            allowedClockSkew: allowedClockSkew
        )
        do {
            let validated = try await validator.validate(jwt, expectations)
            logger.debug(
                "ID token validated",
                metadata: [
                    "oidc.issuer": "\(validated.issuer)",
                    "oidc.subject_hash": LogFields.fingerprint(validated.subject),
                    "oidc.kid": "\(keyID ?? "none")",
                    "oidc.expires_at": "\(validated.expiresAt)",
                ]
            )
            return validated
        } catch {
            // The validator's messages name the failed check, never the token.
            logger.debug(
                "ID token rejected",
                metadata: ["error.code": "\(error.code)", "error.reason": "\(error.message)"]
            )
            throw error
        }
    }
}
