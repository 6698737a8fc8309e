public import Foundation
import GRDB
import PathSafety
import SystemPackage

/// Where the store's 32-byte master key comes from.
public enum MasterKeySource: Sendable {
    /// A key file (32 raw bytes, mode 0600), generated when a new store is created.
    case keyFile(URL)
    /// A passphrase stretched with Argon2id; salt and cost are kept in the store.
    case passphrase(String)
    /// The key file's key sealed as a systemd credential (`SealedKeyFile`): decrypted by systemd-creds.
    case sealedKeyFile(URL)

    /// The key of the store in `directory`: the credential systemd decrypted for the service
    /// (`$CREDENTIALS_DIRECTORY/sharedmode-master-key`, `LoadCredentialEncrypted=`), else the sealed key in
    /// the directory (`master.key.cred`), else the key file `master.key`.
    public static func forStore(
        in directory: URL,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> MasterKeySource {
        if let credentials = environment["CREDENTIALS_DIRECTORY"], !credentials.isEmpty {
            let loaded = URL(fileURLWithPath: credentials).appendingPathComponent(SealedKeyFile.credentialName)
            if FileManager.default.fileExists(atPath: loaded.path) { return .keyFile(loaded) }
        }
        let sealed = directory.appendingPathComponent(SealedKeyFile.fileName)
        if FileManager.default.fileExists(atPath: sealed.path) { return .sealedKeyFile(sealed) }
        return .keyFile(directory.appendingPathComponent(KeychainStore.keyFileName))
    }
}

/// A `MasterKeySource` with its files reached through held directories (`KeyFile.Location`): the state
/// directory the store checked and holds for the files in it, the key file's own directory, reached the
/// same way, for one named elsewhere.
enum HeldKeySource: Sendable {
    case keyFile(KeyFile.Location)
    case passphrase(String)
    case sealedKeyFile(KeyFile.Location)

    /// `source` (nil: the store's default, as `MasterKeySource.forStore(in:)` chooses) for the store in the
    /// state directory `url`, held as `directory`.
    static func resolving(
        _ source: MasterKeySource?,
        stateDirectory url: URL,
        held directory: SafeDirectory,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(KeychainError) -> HeldKeySource {
        func location(_ file: URL) throws(KeychainError) -> KeyFile.Location {
            if file.deletingLastPathComponent().standardizedFileURL.path == url.standardizedFileURL.path {
                return KeyFile.Location(directory: directory, name: file.lastPathComponent)
            }
            return try KeyFile.Location.explicit(FilePath(file.path))
        }
        switch source {
        case .keyFile(let file): return .keyFile(try location(file))
        case .sealedKeyFile(let file): return .sealedKeyFile(try location(file))
        case .passphrase(let passphrase): return .passphrase(passphrase)
        case nil:
            if let credentials = environment["CREDENTIALS_DIRECTORY"], !credentials.isEmpty {
                let loaded = URL(fileURLWithPath: credentials).appendingPathComponent(SealedKeyFile.credentialName)
                if FileManager.default.fileExists(atPath: loaded.path) { return .keyFile(try location(loaded)) }
            }
            let sealed = KeyFile.Location(directory: directory, name: SealedKeyFile.fileName)
            if sealed.exists { return .sealedKeyFile(sealed) }
            return .keyFile(sealed.sibling(KeychainStore.keyFileName))
        }
    }

    /// The key file or sealed key, nil for a passphrase.
    var location: KeyFile.Location? {
        switch self {
        case .keyFile(let location), .sealedKeyFile(let location): location
        case .passphrase: nil
        }
    }
}

/// The keys derived from the master key, and the check that the master key opens this store.
///
/// Subkeys (`crypto_kdf`, context `kcmaster`): 1 key check, 2 group-key wrapping, 3 blind indexes,
/// 4 integrity tags for records kept outside the items table (the audit log's head), 5 the wrapping of
/// the kept keys. A store whose master key was rotated keeps its blind-index and integrity keys (every
/// lookup column and the audit log's head stay valid): they are sealed under subkey 5 of the new master
/// key in `store_meta` (`kept_keys`), and the group keys are re-wrapped under its subkey 2.
struct MasterKeyring: Sendable {
    let wrapping: SecureKey
    let indexer: BlindIndexer
    let integrity: SecureKey

    private enum Meta {
        static let kdf = "kdf", salt = "kdf_salt", ops = "kdf_ops", mem = "kdf_mem", check = "key_check"
        static let keptKeys = "kept_keys", keptKeysNonce = "kept_keys_nonce"
        static let keyFileKDF = "keyfile", passphraseKDF = "argon2id"
    }

    private static let keptKeysAdditionalData = Data("kckept01".utf8)

    private init(master: SecureKey, meta: [String: Data]) throws(KeychainError) {
        wrapping = try KeyDerivation.subkey(2, context: .master, of: master)
        if let sealed = meta[Meta.keptKeys], let nonce = meta[Meta.keptKeysNonce] {
            let keptWrapping = try KeyDerivation.subkey(5, context: .master, of: master)
            guard
                var kept = AEAD.open(
                    .init(nonce: nonce, ciphertext: sealed),
                    additionalData: Self.keptKeysAdditionalData,
                    key: keptWrapping
                ),
                kept.count == 2 * SecureKey.byteCount
            else {
                throw KeychainError(
                    .integrityFailure,
                    "the store's kept keys failed their integrity check (tampered or corrupted); restore the state directory from backup"
                )
            }
            defer { Sodium.wipe(&kept) }
            indexer = BlindIndexer(key: try SecureKey.copying(kept.prefix(SecureKey.byteCount)))
            integrity = try SecureKey.copying(kept.suffix(SecureKey.byteCount))
        } else {
            indexer = BlindIndexer(key: try KeyDerivation.subkey(3, context: .master, of: master))
            integrity = try KeyDerivation.subkey(4, context: .master, of: master)
        }
    }

    /// Puts the store under `newMaster`, inside the caller's write transaction: every group key re-wrapped
    /// under its wrapping key, this keyring's blind-index and integrity keys sealed under it, and its key
    /// check recorded. Items are not touched (their group keys do not change). Returns the number of
    /// group keys re-wrapped.
    /// - Throws: `integrityFailure` when a group's key record does not open (nothing is changed then).
    func rewrap(under newMaster: SecureKey, groupKeys: GroupKeyring, _ db: Database) throws -> Int {
        let newWrapping = try KeyDerivation.subkey(2, context: .master, of: newMaster)
        let groups = try Row.fetchAll(db, sql: "SELECT name_index, key_nonce, wrapped_key FROM access_groups")
        for row in groups {
            let index: Data = row[0]
            guard let rewrapped = try groupKeys.rewrap(index: index, nonce: row[1], wrapped: row[2], under: newWrapping)
            else {
                throw KeychainError(
                    .integrityFailure,
                    "an access group's key record failed its integrity check (tampered or corrupted); nothing was changed. Run `devicectl keychain verify`"
                )
            }
            try db.execute(
                sql: "UPDATE access_groups SET key_nonce = ?, wrapped_key = ? WHERE name_index = ?",
                arguments: [rewrapped.nonce, rewrapped.ciphertext, index]
            )
        }
        var kept = indexer.key.withUnsafeBytes { Data($0) } + integrity.withUnsafeBytes { Data($0) }
        defer { Sodium.wipe(&kept) }
        let box = try AEAD.seal(
            kept,
            additionalData: Self.keptKeysAdditionalData,
            key: try KeyDerivation.subkey(5, context: .master, of: newMaster)
        )
        let rows = [
            Meta.keptKeys: box.ciphertext, Meta.keptKeysNonce: box.nonce, Meta.check: try Self.keyCheck(newMaster),
        ]
        for (name, value) in rows {
            try db.execute(
                sql: "INSERT OR REPLACE INTO store_meta (name, value) VALUES (?, ?)",
                arguments: [name, value]
            )
        }
        return groups.count
    }

    /// Whether `key` is the master key this store's key check was made with (read inside a transaction).
    static func opens(_ key: SecureKey, _ db: Database) throws -> Bool {
        guard
            let stored = try Data.fetchOne(
                db,
                sql: "SELECT value FROM store_meta WHERE name = ?",
                arguments: [Meta.check]
            )
        else { return false }
        return Sodium.constantTimeEqual(stored, try keyCheck(key))
    }

    private static func keyCheck(_ master: SecureKey) throws(KeychainError) -> Data {
        let checkKey = try KeyDerivation.subkey(1, context: .master, of: master)
        return try KeyedHash.hash(
            Data("keychain-store key check v1".utf8),
            domain: 0,
            key: checkKey,
            outputByteCount: 32
        )
    }

    /// Opens the keyring of an existing store, or records a new master key in a new one.
    /// A wrong key is detected before anything is written.
    static func unlock(_ database: some DatabaseWriter, source: HeldKeySource) throws -> MasterKeyring {
        if let meta = try readMeta(database), meta[Meta.check] != nil {
            return try verify(source, against: meta)
        }
        let master: SecureKey
        var rows: [String: Data]
        switch source {
        case .keyFile(let location):
            master = try KeyFile.loadOrCreate(location)
            rows = [Meta.kdf: Data(Meta.keyFileKDF.utf8)]
        case .sealedKeyFile(let location):
            throw KeychainError(
                .corruptStore,
                "the state directory holds a sealed key (\(location.path)) but no store; restore the store from backup, or remove the sealed key to start afresh"
            )
        case .passphrase(let passphrase):
            let parameters = KeyDerivation.PasswordHashParameters.interactive()
            master = try KeyDerivation.masterKey(passphrase: passphrase, parameters: parameters)
            rows = [
                Meta.kdf: Data(Meta.passphraseKDF.utf8), Meta.salt: parameters.salt,
                Meta.ops: encode(parameters.opsLimit), Meta.mem: encode(parameters.memLimit),
            ]
        }
        rows[Meta.check] = try keyCheck(master)
        let won = try database.write { db -> Bool in
            guard
                try Data.fetchOne(db, sql: "SELECT value FROM store_meta WHERE name = ?", arguments: [Meta.check])
                    == nil
            else { return false }
            for (name, value) in rows {
                try db.execute(sql: "INSERT INTO store_meta (name, value) VALUES (?, ?)", arguments: [name, value])
            }
            return true
        }
        if won { return try MasterKeyring(master: master, meta: [:]) }
        // Another process initialised the store between our read and our write.
        guard let meta = try readMeta(database) else {
            throw KeychainError(.corruptStore, "the store's key record vanished")
        }
        return try verify(source, against: meta)
    }

    private static func readMeta(_ database: some DatabaseWriter) throws -> [String: Data]? {
        try database.read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT name, value FROM store_meta")
            return rows.isEmpty
                ? nil : Dictionary(rows.map { ($0[0] as String, $0[1] as Data) }, uniquingKeysWith: { a, _ in a })
        }
    }

    private static func verify(_ source: HeldKeySource, against meta: [String: Data]) throws -> MasterKeyring {
        let kdf = meta[Meta.kdf].flatMap { String(data: $0, encoding: .utf8) }
        let master: SecureKey
        switch (kdf, source) {
        case (Meta.keyFileKDF, .keyFile(let location)):
            guard let key = try KeyFile.load(location) else {
                throw KeychainError(
                    .wrongKey,
                    "key file \(location.path) is missing; restore it from backup (this store cannot be opened without it)"
                )
            }
            master = key
        case (Meta.keyFileKDF, .sealedKeyFile(let location)):
            master = try SealedKeyFile.unseal(location)
        case (Meta.passphraseKDF, .passphrase(let passphrase)):
            guard let salt = meta[Meta.salt], let ops = meta[Meta.ops].flatMap(decode),
                let mem = meta[Meta.mem].flatMap(decode)
            else {
                throw KeychainError(.corruptStore, "the store's passphrase parameters are missing or damaged")
            }
            master = try KeyDerivation.masterKey(
                passphrase: passphrase,
                parameters: .init(salt: salt, opsLimit: ops, memLimit: mem)
            )
        case (Meta.keyFileKDF, .passphrase):
            throw KeychainError(
                .wrongKey,
                "this store is protected by a key file, not a passphrase; open it with its key file"
            )
        case (Meta.passphraseKDF, .keyFile), (Meta.passphraseKDF, .sealedKeyFile):
            throw KeychainError(
                .wrongKey,
                "this store is protected by a passphrase; supply it (devicectl: --passphrase-file)"
            )
        default:
            throw KeychainError(.corruptStore, "the store's key record names an unknown key derivation")
        }
        guard let stored = meta[Meta.check], Sodium.constantTimeEqual(stored, try keyCheck(master)) else {
            let what =
                switch source {
                case .passphrase: "passphrase"
                case .keyFile: "key file"
                case .sealedKeyFile: "sealed key"
                }
            throw KeychainError(
                .wrongKey,
                "the \(what) does not open this store; nothing was changed. Use the \(what) the store was created with"
            )
        }
        return try MasterKeyring(master: master, meta: meta)
    }

    private static func encode(_ value: UInt64) -> Data { withUnsafeBytes(of: value.littleEndian) { Data($0) } }
    private static func decode(_ data: Data) -> UInt64? {
        data.count == 8 ? UInt64(littleEndian: data.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }) : nil
    }
}
