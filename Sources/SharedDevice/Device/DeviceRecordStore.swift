import Foundation
import KeychainStore

/// Reads and writes the device's own items (record, signing key, audit anchor) inside a transaction.
enum DeviceRecordStore {
    /// The device record, `nil` when the device is not provisioned; bytes `cache` decoded before are not decoded
    /// again (the record holds no secret: its policy, public key and dates).
    static func record(
        in tx: StoreTransaction,
        decodedBy cache: LastDecoded<Data, DeviceRecord>
    ) throws -> DeviceRecord? {
        guard var item = try findOrNil(DeviceItems.query(DeviceItems.recordService), in: tx) else { return nil }
        defer { SecureMemory.wipe(&item.secret) }
        do {
            let bytes = Data(item.secret)  // a copy of its own: the item's bytes are wiped
            return try cache.value(for: bytes) { try DeviceItems.decoder.decode(DeviceRecord.self, from: bytes) }
        } catch {
            throw SharedDeviceError(
                .deviceRecordDamaged,
                "the device record cannot be read; re-provision with `devicectl provision --policy FILE --force`"
            )
        }
    }

    static func save(_ record: DeviceRecord, in tx: StoreTransaction, replacing: Bool) throws {
        var secret = try DeviceItems.encoder.encode(record)
        defer { SecureMemory.wipe(&secret) }
        if replacing {
            try tx.update(
                DeviceItems.query(DeviceItems.recordService),
                with: ItemChanges(secret: secret),
                as: DeviceItems.administrator
            )
        } else {
            try tx.add(
                NewItem(
                    accessGroup: AccessGroup.device,
                    service: DeviceItems.recordService,
                    account: DeviceItems.account,
                    secret: secret,
                    label: "device record"
                ),
                as: DeviceItems.administrator
            )
        }
    }

    static func saveSigningKey(_ key: SigningKey, in tx: StoreTransaction) throws {
        var secret = key.sealedForStorage()
        defer { SecureMemory.wipe(&secret) }
        try tx.add(
            NewItem(
                accessGroup: AccessGroup.device,
                service: DeviceItems.signingKeyService,
                account: DeviceItems.account,
                secret: secret,
                label: "audit signing key"
            ),
            as: DeviceItems.administrator
        )
    }

    /// The signer for `record`'s key and policy interval.
    static func signer(for record: DeviceRecord, in tx: StoreTransaction) throws -> AuditLog.Signer {
        guard var item = try findOrNil(DeviceItems.query(DeviceItems.signingKeyService), in: tx) else {
            throw SharedDeviceError(
                .deviceRecordDamaged,
                "the device's audit signing key is missing; re-provision with `devicectl provision --policy FILE --force`"
            )
        }
        defer { SecureMemory.wipe(&item.secret) }
        let key = try SigningKey(storedBytes: item.secret)
        guard key.publicKey == record.auditPublicKey else {
            throw SharedDeviceError(.deviceRecordDamaged, "the device's audit signing key does not match its record")
        }
        return AuditLog.Signer(key: key, checkpointInterval: try record.policy().audit.checkpointInterval)
    }

    static func anchor(in tx: StoreTransaction) throws -> AuditAnchor? {
        guard
            var item = try findOrNil(
                DeviceItems.query(DeviceItems.anchorService, group: AccessGroup.auditAnchor),
                in: tx
            )
        else { return nil }
        defer { SecureMemory.wipe(&item.secret) }
        guard let anchor = try? DeviceItems.decoder.decode(AuditAnchor.self, from: item.secret) else {
            throw SharedDeviceError(.deviceRecordDamaged, "the audit log's trust anchor cannot be read")
        }
        return anchor
    }

    /// Adds `publicKey` to the audit anchor (creating it).
    static func trust(_ publicKey: Data, in tx: StoreTransaction) throws {
        let query = DeviceItems.query(DeviceItems.anchorService, group: AccessGroup.auditAnchor)
        var anchor = try anchor(in: tx) ?? AuditAnchor(publicKeys: [])
        let exists = !anchor.publicKeys.isEmpty
        guard !anchor.publicKeys.contains(publicKey) else { return }
        anchor.publicKeys.append(publicKey)
        let secret = try DeviceItems.encoder.encode(anchor)
        if exists {
            try tx.update(query, with: ItemChanges(secret: secret), as: DeviceItems.administrator)
        } else {
            try tx.add(
                NewItem(
                    accessGroup: AccessGroup.auditAnchor,
                    service: DeviceItems.anchorService,
                    account: DeviceItems.account,
                    secret: secret,
                    label: "audit trust anchor"
                ),
                as: DeviceItems.administrator
            )
        }
    }

    private static func findOrNil(_ query: ItemQuery, in tx: StoreTransaction) throws -> KeychainItem? {
        do {
            return try tx.find(query, as: DeviceItems.administrator)
        } catch KeychainError.Code.itemNotFound {
            return nil
        }
    }
}
