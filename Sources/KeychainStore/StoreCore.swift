import Foundation

/// What every transaction on one open store needs: the derived keys, the options and the connection's
/// prepared statements.
struct StoreCore: Sendable {
    let keyring: MasterKeyring
    let indexer: BlindIndexer
    let groupKeys: GroupKeyring
    let integrityKey: SecureKey
    let options: StoreOptions
    /// The hot paths' statements, prepared once on the store's one connection.
    let statements = ConnectionStatements()
    /// Whether anything was committed since a read transaction last took the change stamp.
    let commitWatch: CommitWatch

    init(keyring: MasterKeyring, options: StoreOptions, commitWatch: CommitWatch) {
        self.keyring = keyring
        indexer = keyring.indexer
        groupKeys = GroupKeyring(wrapping: keyring.wrapping)
        integrityKey = keyring.integrity
        self.options = options
        self.commitWatch = commitWatch
    }
}
