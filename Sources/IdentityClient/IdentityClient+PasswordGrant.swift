import Foundation
import Logging

// The resource-owner password credentials grant (RFC 6749 §4.3): the kiosk's own screen takes the worker's
// username and password, for providers that require it (policy `authority.flows` lists `password`).
extension IdentityClient {
    /// Signs `username` in with `password` at the token endpoint and returns the validated grant.
    ///
    /// The password goes only into the request body, which is overwritten with zeros once the request is
    /// sent; it is never logged, and no error carries it (a server description that echoes it is dropped).
    /// - Throws: `invalidCredentials` when the provider refuses the username or password (`invalid_grant`);
    ///   `unsupported` when the provider does not allow the grant (`unsupported_grant_type`,
    ///   `unauthorized_client`); `invalidIDToken`; server errors; `authorityUnreachable`.
    public func acquireTokenByPassword(
        username: String,
        password: String,
        scopes: [String]
    ) async throws(IdentityError) -> TokenGrant {
        let requested = authority.requestScopes(scopes)
        logger.debug("password sign-in started", metadata: ["oauth.scopes": LogFields.scopes(requested)])
        do throws(IdentityError) {
            let configuration = try await configuration()
            var fields =
                [("grant_type", "password"), ("username", username), ("password", password)] + clientFields
                + [("scope", requested.joined(separator: " "))]
            if authority.sendsClientInfo { fields.append(("client_info", "1")) }
            var request = HTTPRequest.form(configuration.tokenEndpoint, fields)
            fields.removeAll()
            let response: HTTPResponse
            do {
                response = try await post(request)
                Self.wipe(&request.body)
            } catch {
                Self.wipe(&request.body)
                throw error
            }
            guard response.isSuccess else { throw Self.passwordFailure(response, password: password) }
            let grant = try await grant(
                from: response,
                grantType: "password",
                requestedScopes: requested,
                nonce: nil,
                requireIDToken: true
            )
            try Self.checkGranted(grant, covers: scopes)
            logger.debug("password sign-in succeeded", metadata: ["oauth.scopes": LogFields.scopes(grant.scopes)])
            return grant
        } catch {
            logger.debug("password sign-in failed", metadata: LogFields.failure(error))
            throw error
        }
    }

    /// The error of a refused password grant, without anything that echoes the password.
    static func passwordFailure(_ response: HTTPResponse, password: String) -> IdentityError {
        // Some providers (glewlwyd) refuse a wrong password with a bare 403 instead of RFC 6749's 400 `invalid_grant`.
        if [400, 401, 403].contains(response.status), OAuthErrorResponse.parse(response.body) == nil {
            return IdentityError(
                .invalidCredentials,
                "the authority refused the username or password (HTTP \(response.status)); nothing was cached — check them and sign in again",
                httpStatus: response.status
            )
        }
        var error = OAuthErrorResponse.identityError(for: response, endpoint: "token endpoint")
        if let description = error.serverDescription, !password.isEmpty, description.contains(password) {
            error.serverDescription = nil
        }
        switch error.oauthError {
        case "invalid_grant":
            error.code = .invalidCredentials
            error.message = "the username or password is incorrect; nothing was cached — check them and sign in again"
        case "unsupported_grant_type", "unauthorized_client":
            error.code = .unsupported
            error.message =
                "the authority does not allow password sign-in for this client; use the device code or the browser, or ask its administrator to allow the password grant"
        default:
            break
        }
        return error
    }

    /// Overwrites a request body with zeros (the buffer this request owns).
    static func wipe(_ body: inout Data?) {
        guard var bytes = body else { return }
        body = nil
        bytes.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return }
            memset(base, 0, raw.count)
        }
        withExtendedLifetime(bytes) {}
    }
}
