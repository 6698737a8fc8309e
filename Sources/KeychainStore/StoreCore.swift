import Foundation

/// What every transaction on one open store needs: the derived keys and the options.
struct StoreCore: Sendable {
    let indexer: BlindIndexer
    let groupKeys: GroupKeyring
    let integrityKey: SecureKey
    let options: StoreOptions

    init(keyring: MasterKeyring, options: StoreOptions) {
        indexer = keyring.indexer
        groupKeys = GroupKeyring(wrapping: keyring.wrapping)
        integrityKey = keyring.integrity
        self.options = options
    }
}
