import CSodium
import Foundation
import GRDB

/// Authenticating and decoding one stored item: the checks every read makes, in one place.
enum ItemOpening {
    /// Decrypts the row's ciphertext with its group's key (reloading the key once if another process
    /// replaced the group), authenticates it against `additionalData` (the row's lookup columns), decodes
    /// it and re-checks that it belongs to `group`. The plaintext lives in a buffer wiped before returning.
    /// - Throws: `integrityFailure` naming the row when any check fails.
    static func open(
        rowID: Int64,
        format: Int,
        groupIndex: Data,
        group: String,
        nonce: UnsafeRawBufferPointer,
        ciphertext: UnsafeRawBufferPointer,
        additionalData: UnsafeRawBufferPointer,
        known: ItemPayload.KnownStrings? = nil,
        _ core: StoreCore,
        _ db: Database
    ) throws -> KeychainItem {
        func damaged(_ reason: String) -> KeychainError {
            let item = DamagedItem(rowID: rowID, accessGroup: group, reason: reason)
            return KeychainError(
                .integrityFailure,
                "\(item) (tampered or corrupted); run `devicectl keychain verify`, then delete the item or restore the store from backup",
                damagedItems: [item]
            )
        }
        guard format == Schema.itemFormat else { throw damaged("unknown item format \(format)") }
        guard let key = try core.groupKeys.keyForReading(index: groupIndex, db) else {
            throw damaged("its access group has no key")
        }
        guard let count = AEAD.plaintextByteCount(ofCiphertext: ciphertext.count) else {
            throw damaged("it failed authentication")
        }
        return try withUnsafeTemporaryAllocation(byteCount: count, alignment: 16) { plaintext in
            defer { sodium_memzero(plaintext.baseAddress, count) }
            var opened = AEAD.open(
                nonce: nonce,
                ciphertext: ciphertext,
                additionalData: additionalData,
                key: key,
                into: plaintext
            )
            if !opened, let replaced = try core.groupKeys.reloadIfReplaced(index: groupIndex, db) {
                opened = AEAD.open(
                    nonce: nonce,
                    ciphertext: ciphertext,
                    additionalData: additionalData,
                    key: replaced,
                    into: plaintext
                )
            }
            guard opened else { throw damaged("it failed authentication") }
            guard let item = ItemPayload.decode(UnsafeRawBufferPointer(plaintext), known: known) else {
                throw damaged("its sealed payload is malformed")
            }
            guard item.metadata.accessGroup == group else { throw damaged("it belongs to another access group") }
            return item
        }
    }

    /// `open` for a row already read into memory.
    static func open(
        _ sealed: ItemTable.SealedRow,
        group: String,
        _ core: StoreCore,
        _ db: Database
    ) throws -> KeychainItem {
        let additionalData = sealed.indexes.additionalData(format: sealed.format)
        return try sealed.box.nonce.withUnsafeBytes { nonce in
            try sealed.box.ciphertext.withUnsafeBytes { ciphertext in
                try additionalData.withUnsafeBytes { additionalData in
                    try open(
                        rowID: sealed.id,
                        format: sealed.format,
                        groupIndex: sealed.indexes.group,
                        group: group,
                        nonce: nonce,
                        ciphertext: ciphertext,
                        additionalData: additionalData,
                        core,
                        db
                    )
                }
            }
        }
    }
}
