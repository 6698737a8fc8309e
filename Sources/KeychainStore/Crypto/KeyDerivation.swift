import CSodium
import Foundation

/// Subkeys from a 32-byte root key with `crypto_kdf` (BLAKE2b), and master keys from passphrases
/// with Argon2id (`crypto_pwhash`).
enum KeyDerivation {
    /// The 8-byte `crypto_kdf` contexts that separate the two key hierarchies.
    enum Context: String {
        case master = "kcmaster"
        case group = "kcgroup1"
    }

    /// Subkey `id` of `root` within `context`.
    static func subkey(_ id: UInt64, context: Context, of root: SecureKey) throws(KeychainError) -> SecureKey {
        try SecureKey { buffer throws(KeychainError) in
            let status = context.rawValue.withCString { ctx in
                crypto_kdf_derive_from_key(
                    buffer.bindMemory(to: UInt8.self).baseAddress!,
                    buffer.count,
                    id,
                    ctx,
                    root.bytes
                )
            }
            guard status == 0 else { throw KeychainError(.cryptoUnavailable, "key derivation failed") }
        }
    }

    /// Argon2id cost parameters, stored with the store so the same passphrase gives the same key.
    struct PasswordHashParameters: Equatable, Sendable {
        var salt: Data
        var opsLimit: UInt64
        var memLimit: UInt64

        static let saltByteCount = Int(crypto_pwhash_SALTBYTES)

        /// At least libsodium's INTERACTIVE limits, with a fresh salt.
        static func interactive() -> PasswordHashParameters {
            PasswordHashParameters(
                salt: Sodium.randomData(count: saltByteCount),
                opsLimit: UInt64(crypto_pwhash_OPSLIMIT_INTERACTIVE),
                memLimit: UInt64(crypto_pwhash_MEMLIMIT_INTERACTIVE)
            )
        }
    }

    /// The master key for `passphrase` under `parameters` (Argon2id13).
    static func masterKey(passphrase: String, parameters: PasswordHashParameters) throws(KeychainError) -> SecureKey {
        guard !passphrase.isEmpty else { throw KeychainError(.invalidParameter, "the passphrase is empty") }
        guard parameters.salt.count == PasswordHashParameters.saltByteCount,
            parameters.opsLimit >= UInt64(crypto_pwhash_OPSLIMIT_MIN),
            parameters.memLimit >= UInt64(crypto_pwhash_MEMLIMIT_MIN),
            parameters.memLimit <= 1 << 32
        else { throw KeychainError(.corruptStore, "the stored passphrase parameters are invalid") }
        var password = Data(passphrase.utf8)
        defer { Sodium.wipe(&password) }
        return try SecureKey { buffer throws(KeychainError) in
            let status = password.withUnsafeBytes { pw in
                parameters.salt.withUnsafeBytes { salt in
                    crypto_pwhash(
                        buffer.bindMemory(to: UInt8.self).baseAddress!,
                        UInt64(buffer.count),
                        pw.bindMemory(to: CChar.self).baseAddress!,
                        UInt64(password.count),
                        salt.bindMemory(to: UInt8.self).baseAddress!,
                        parameters.opsLimit,
                        Int(parameters.memLimit),
                        crypto_pwhash_ALG_ARGON2ID13
                    )
                }
            }
            guard status == 0 else {
                throw KeychainError(
                    .cryptoUnavailable,
                    "Argon2id ran out of memory deriving the master key; free memory and retry"
                )
            }
        }
    }
}
