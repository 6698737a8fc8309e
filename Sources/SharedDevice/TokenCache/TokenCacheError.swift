public import KeychainStore

/// An error from the token cache: a token response it cannot attribute to an account, a unified-cache
/// document it cannot import, or a failure of the keychain store underneath.
///
/// Like `SharedDeviceError`, a struct with an extensible `Code`. Messages name fields and JSON paths,
/// never a token, a secret or a claim value.
public struct TokenCacheError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, matchable in `catch` (`catch TokenCacheError.Code.invalidTokenResponse`).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Kind: Hashable, Sendable {
            case invalidTokenResponse, invalidCacheDocument, store
        }
        let kind: Kind
        init(_ kind: Kind) { self.kind = kind }

        /// The token response is malformed (an `id_token` that is not a JWT, undecodable `client_info`)
        /// or names no account (neither `client_info` nor an `id_token`, and no home account id in the context).
        public static let invalidTokenResponse = Code(.invalidTokenResponse)
        /// The unified-cache JSON to import is malformed (see `path`).
        public static let invalidCacheDocument = Code(.invalidCacheDocument)
        /// The keychain store failed (see `storeError`).
        public static let store = Code(.store)

        /// Lets `catch TokenCacheError.Code.invalidCacheDocument { … }` match.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? TokenCacheError)?.code == code
        }

        public var description: String {
            switch kind {
            case .invalidTokenResponse: "invalid token response"
            case .invalidCacheDocument: "invalid cache document"
            case .store: "store error"
            }
        }
    }

    /// The failure class.
    public let code: Code
    /// What happened and what to do. Never contains a token or secret.
    public let message: String
    /// For `.invalidCacheDocument` and `.invalidTokenResponse`: where, e.g. `AccessToken["<key>"].expires_on`.
    public let path: String?
    /// For `.store`: the store's error.
    public let storeError: KeychainError?

    init(_ code: Code, _ message: String, path: String? = nil, storeError: KeychainError? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.storeError = storeError
    }

    /// A cache document or token response over `InputLimits.cacheDocumentBytes`.
    static let documentTooLarge = TokenCacheError(
        .invalidCacheDocument,
        "the document is larger than \(InputLimits.describe(bytes: InputLimits.cacheDocumentBytes)), the limit for a cache document or token response; nothing was read past the limit",
        path: "(document)"
    )

    /// Wraps any error from a store transaction: token-cache errors pass through, store errors are kept.
    static func wrapping(_ error: any Error) -> TokenCacheError {
        switch error {
        case let error as TokenCacheError: error
        case let error as KeychainError: TokenCacheError(.store, error.message, storeError: error)
        default: TokenCacheError(.store, "the token cache's store failed: \(type(of: error))")
        }
    }

    public var description: String {
        if let storeError { return storeError.description }
        if let path { return "\(path): \(message) (\(code))" }
        return "\(message) (\(code))"
    }
}

/// Runs `body`, turning any error into a `TokenCacheError`.
func tokenCacheErrors<T>(_ body: () throws -> T) throws(TokenCacheError) -> T {
    do {
        return try body()
    } catch {
        throw TokenCacheError.wrapping(error)
    }
}
