import Foundation

/// The entries one token response produced (MSAL Android's `ICacheRecord`): what `TokenCache.save` wrote.
public struct CacheRecord: Sendable, Equatable {
    /// The account, when the response identifies one by an ID token or `client_info`.
    public var account: AccountCacheItem?
    /// The ID token, when the response has one.
    public var idToken: IdTokenCacheItem?
    /// The access token.
    public var accessToken: AccessTokenCacheItem
    /// The app's own refresh token, when the response has one.
    public var refreshToken: RefreshTokenCacheItem?
    /// The family refresh token, when the response has a refresh token and a family id (FOCI).
    public var familyRefreshToken: RefreshTokenCacheItem?
    /// The app's metadata (its family).
    public var appMetadata: AppMetadataCacheItem

    /// Builds the entries of `response` as MSAL does, `cachedAt` being the time it arrived.
    ///
    /// `expires_on` is `cached_at + expires_in` (600 s when absent, as MSAL Python),
    /// `extended_expires_on` uses `ext_expires_in` (else `expires_in`), `refresh_on` is written only
    /// when the response has `refresh_in`. The target is the response's `scope`, else the requested
    /// scopes, sorted.
    init(response: TokenResponse, context: TokenRequestContext, account identity: ResponseAccount, cachedAt: Date) {
        let now = Date(timeIntervalSince1970: TimeInterval(UnixTime.seconds(cachedAt)))
        let home = identity.homeAccountID
        let environment = context.environment
        let client = context.clientID
        let expiresIn = response.expiresIn ?? 600
        accessToken = AccessTokenCacheItem(
            homeAccountID: home,
            environment: environment,
            clientID: client,
            realm: identity.realm,
            target: Scopes.target(response.scope.map(Scopes.split) ?? context.requestedScopes),
            secret: response.accessToken,
            tokenType: response.tokenType ?? "Bearer",
            cachedAt: now,
            expiresOn: now + TimeInterval(expiresIn),
            extendedExpiresOn: now + TimeInterval(response.extendedExpiresIn ?? expiresIn),
            refreshOn: response.refreshIn.map { now + TimeInterval($0) }
        )
        let family = (response.familyID ?? "").isEmpty ? nil : response.familyID
        refreshToken = response.refreshToken.map {
            RefreshTokenCacheItem(
                homeAccountID: home,
                environment: environment,
                clientID: client,
                familyID: nil,
                secret: $0,
                lastModificationTime: now
            )
        }
        familyRefreshToken = family.flatMap { family in
            response.refreshToken.map {
                RefreshTokenCacheItem(
                    homeAccountID: home,
                    environment: environment,
                    clientID: client,
                    familyID: family,
                    secret: $0,
                    lastModificationTime: now
                )
            }
        }
        idToken = response.idToken.map {
            IdTokenCacheItem(
                homeAccountID: home,
                environment: environment,
                clientID: client,
                realm: identity.realm,
                secret: $0
            )
        }
        let claims = identity.claims
        account =
            claims == nil && identity.clientInfo == nil
            ? nil
            : AccountCacheItem(
                homeAccountID: home,
                environment: environment,
                realm: identity.realm,
                localAccountID: claims?.localAccountID ?? home.split(separator: ".").first.map(String.init),
                username: claims?.username ?? "",
                authorityType: AccountCacheItem.msstsAuthorityType,
                name: claims?.name,
                givenName: claims?.givenName,
                familyName: claims?.familyName,
                clientInfo: identity.clientInfo
            )
        appMetadata = AppMetadataCacheItem(clientID: client, environment: environment, familyID: family)
    }
}
