public import Foundation
public import KeychainStore
public import Logging
import Synchronization

/// A device under a policy: provisioning, deprovisioning, the apps' entitlements, and the audit log.
///
/// Every state change is one store transaction that also appends its audit events, so a change is
/// either recorded and complete or absent, even if the process is killed midway.
///
/// ```swift
/// let device = ManagedDevice(store: try KeychainStore(directory: stateDirectory))
/// let outcome = try device.provision(policyDocument: Data(contentsOf: policyURL), actor: "devicectl (uid 0 root)")
/// let scanner = try device.appIdentity("com.contoso.kiosk.scanner", actor: "com.contoso.kiosk.scanner")
/// ```
public final class ManagedDevice: Sendable {
    /// The store the device's records, the apps' items and the audit log live in.
    public let store: KeychainStore
    private let logger: Logger
    /// The audit signer and the policy hash its interval came from, to skip decrypting the key per event.
    private let cachedSigner = Mutex<(signer: AuditLog.Signer, policySHA256: String)?>(nil)

    /// The last device record and the bytes it was decoded from: a record carries its whole policy
    /// document, and a sign-out or sign-in reads it.
    private let decodedRecord = LastDecoded<Data, DeviceRecord>()
    /// The access groups of the last policy's apps, by the hash of its document (decoding a policy with many
    /// apps is not free).
    private let decodedAppGroups = LastDecoded<String, AppGroups>()
    /// The audit events appended through this object, to its listeners once committed (the account changes).
    let committedAuditEvents = CommittedAuditEvents()

    /// Every access group of a policy's apps.
    struct AppGroups: Sendable {
        /// Sorted, each once.
        let sorted: [String]
        let set: Set<String>
    }

    /// Wraps an open store.
    /// - Parameter logger: where provisioning, deprovisioning and refused apps are reported (never a
    ///   secret); by default the task-local `Logger.current`.
    public init(store: KeychainStore, logger: Logger = Logger.current) {
        self.store = store
        self.logger = logger
    }

    // MARK: - Provisioning

    /// What `provision` did.
    public enum ProvisioningOutcome: String, Sendable, Encodable {
        /// The device had no policy; it has one now (`device.provisioned`).
        case provisioned
        /// The same policy was already applied; nothing changed.
        case unchanged
        /// A changed policy with the same mode was applied (`policy.updated`).
        case updated
        /// A forced change of mode wiped every app's credentials (`device.mode_changed`).
        case modeChanged = "mode_changed"
    }

    /// Applies a policy document (the bytes of a policy file).
    ///
    /// The first time it records the policy, its SHA-256, a new device id and a new Ed25519 audit
    /// signing key in the device's own group. The same policy again changes nothing. A changed policy
    /// updates the record and crypto-shreds the groups no app of the new policy is entitled to. A new
    /// mode needs `force` and crypto-shreds every group but the device's own.
    /// - Throws: `invalidPolicy`, `modeChangeRequiresForce`, `store`.
    @discardableResult
    public func provision(
        policyDocument: Data,
        force: Bool = false,
        actor: String
    ) throws(SharedDeviceError) -> (outcome: ProvisioningOutcome, record: DeviceRecord) {
        let policy: DevicePolicy
        do {
            policy = try DevicePolicy.decode(policyDocument)
        } catch {
            logger.debug(
                "device policy rejected",
                metadata: ["path": "\(error.path)", "bytes": "\(policyDocument.count)"]
            )
            throw SharedDeviceError(.invalidPolicy, error.description, policyError: error)
        }
        let hash = try sharedDeviceErrors { try ChainHash.sha256Hex(policyDocument) }
        do {
            if let current = try record(), current.policySHA256 == hash {
                logger.debug(
                    "device policy applied",
                    metadata: ["outcome": "unchanged", "policy.sha256": "\(hash)", "actor": "\(actor)"]
                )
                return (.unchanged, current)
            }
        } catch  where force && Self.isDamage(error) {
            // Replaced below.
        }
        let result = try transaction { tx -> (ProvisioningOutcome, DeviceRecord, AuditLog.Signer) in
            let now = tx.now
            var existing: DeviceRecord?
            var replacesDamagedRecord = false
            do {
                existing = try self.record(in: tx)
                if let existing { _ = try DeviceRecordStore.signer(for: existing, in: tx) }
            } catch  where force && Self.isDamage(error) {
                existing = nil
                replacesDamagedRecord = true
            }
            if var record = existing {
                if record.policySHA256 == hash {
                    return (.unchanged, record, try DeviceRecordStore.signer(for: record, in: tx))
                }
                let previous = record
                let modeChanged = record.mode != policy.device.mode
                if modeChanged && !force {
                    throw SharedDeviceError(
                        .modeChangeRequiresForce,
                        "the policy changes the device's mode from \(record.mode.rawValue) to \(policy.device.mode.rawValue), which signs every worker out and deletes every app's credentials; rerun with --force to do it"
                    )
                }
                let keep: Set<String> =
                    modeChanged
                    ? [AccessGroup.device, AccessGroup.auditAnchor]
                    : Set(policy.apps.flatMap(\.accessGroups)).union([AccessGroup.device, AccessGroup.auditAnchor])
                let removed = try tx.destroyAccessGroups(except: keep)
                let signedOut = modeChanged ? try AccountRecords.signOutEveryone(in: tx, reason: .admin) : []
                record.name = policy.device.name
                record.mode = policy.device.mode
                record.policyID = policy.id
                record.policySHA256 = hash
                record.policyDocument = policyDocument
                record.policyAppliedAt = now
                try DeviceRecordStore.save(record, in: tx, replacing: true)
                let signer = try DeviceRecordStore.signer(for: record, in: tx)
                var details = [
                    "previousPolicySha256": previous.policySHA256, "policySha256": hash,
                    "groupsRemoved": "\(removed.groups)", "itemsRemoved": "\(removed.items)",
                ]
                details["policyId"] = policy.id
                if modeChanged {
                    details["accountsSignedOut"] = "\(signedOut.count)"
                    details["from"] = previous.mode.rawValue
                    details["to"] = record.mode.rawValue
                }
                try self.appendAnnounced(
                    AuditEntry(
                        type: modeChanged ? .deviceModeChanged : .policyUpdated,
                        actor: actor,
                        reason: modeChanged ? "forced mode change" : "policy changed",
                        details: details
                    ),
                    in: tx,
                    signer: signer,
                    checkpoint: true
                )
                return (modeChanged ? .modeChanged : .updated, record, signer)
            }
            // A new device (or one provisioned again after deprovisioning).
            let key = try SigningKey.generate()
            let record = DeviceRecord(
                deviceID: UUID().uuidString.lowercased(),
                name: policy.device.name,
                mode: policy.device.mode,
                policyID: policy.id,
                policySHA256: hash,
                policyDocument: policyDocument,
                provisionedAt: now,
                policyAppliedAt: now,
                auditPublicKey: key.publicKey
            )
            // A damaged record says nothing reliable about the old mode: then nothing of the apps is kept.
            let keep = replacesDamagedRecord ? [] : Set(policy.apps.flatMap(\.accessGroups))
            let removed = try tx.destroyAccessGroups(except: keep.union([AccessGroup.auditAnchor]))
            try DeviceRecordStore.save(record, in: tx, replacing: false)
            try DeviceRecordStore.saveSigningKey(key, in: tx)
            try DeviceRecordStore.trust(key.publicKey, in: tx)
            let signer = AuditLog.Signer(key: key, checkpointInterval: policy.audit.checkpointInterval)
            var details = [
                "deviceId": record.deviceID, "mode": record.mode.rawValue, "policySha256": hash,
                "auditPublicKey": record.auditPublicKey.hexString, "groupsRemoved": "\(removed.groups)",
            ]
            details["policyId"] = policy.id
            if replacesDamagedRecord { details["replacedDamagedRecord"] = "true" }
            try self.appendAnnounced(
                AuditEntry(
                    type: .deviceProvisioned,
                    actor: actor,
                    reason: replacesDamagedRecord
                        ? "forced re-provisioning over a damaged device record" : "provisioned from policy",
                    details: details
                ),
                in: tx,
                signer: signer,
                checkpoint: true
            )
            return (.provisioned, record, signer)
        }
        cachedSigner.withLock { $0 = (result.2, result.1.policySHA256) }
        if result.0 == .modeChanged {
            ChangeSignal(directory: store.databaseURL.deletingLastPathComponent()).notify()
        }
        logger.debug(
            "device policy applied",
            metadata: [
                "outcome": "\(result.0.rawValue)", "policy.sha256": "\(hash)", "mode": "\(result.1.mode.rawValue)",
                "actor": "\(actor)",
            ]
        )
        return (result.0, result.1)
    }

    /// What `deprovision` did.
    public struct DeprovisioningOutcome: Sendable, Encodable {
        /// Whether the device was provisioned (otherwise nothing changed).
        public let wasProvisioned: Bool
        public let groupsRemoved: Int
        public let itemsRemoved: Int
    }

    /// Crypto-shreds every app's data and key and the device's own records (its signing key included),
    /// after appending a signed `device.deprovisioned` event. The audit log and its trust anchor stay,
    /// so `verifyAudit` still works. A device that is not provisioned is left as it is.
    public func deprovision(actor: String, reason: String? = nil) throws(SharedDeviceError) -> DeprovisioningOutcome {
        let outcome = try essentialTransaction { tx -> DeprovisioningOutcome in
            // A damaged record or signing key does not stop a deprovisioning: the event is then still
            // chained and covered by the head, just not signed.
            var record: DeviceRecord?
            var signer: AuditLog.Signer?
            do {
                record = try self.record(in: tx)
                guard let record else {
                    return DeprovisioningOutcome(wasProvisioned: false, groupsRemoved: 0, itemsRemoved: 0)
                }
                signer = try DeviceRecordStore.signer(for: record, in: tx)
            } catch  where Self.isDamage(error) {
                signer = nil
            }
            let groups = try tx.accessGroupNames().filter { $0 != AccessGroup.auditAnchor }
            try self.appendAnnounced(
                AuditEntry(
                    type: .deviceDeprovisioned,
                    actor: actor,
                    reason: reason ?? "deprovisioned by the administrator",
                    details: [
                        "deviceId": record?.deviceID ?? "unknown (damaged record)", "groupsRemoved": "\(groups.count)",
                    ]
                ),
                in: tx,
                signer: signer,
                checkpoint: true
            )
            let removed = try tx.destroyAccessGroups(except: [AccessGroup.auditAnchor])
            return DeprovisioningOutcome(
                wasProvisioned: true,
                groupsRemoved: removed.groups,
                itemsRemoved: removed.items
            )
        }
        cachedSigner.withLock { $0 = nil }
        logger.debug(
            "device deprovisioned",
            metadata: [
                "was.provisioned": "\(outcome.wasProvisioned)", "groups.removed": "\(outcome.groupsRemoved)",
                "items.removed": "\(outcome.itemsRemoved)", "actor": "\(actor)",
            ]
        )
        return outcome
    }

    // MARK: - Records and entitlements

    /// The device record, `nil` when the device is not provisioned.
    public func record() throws(SharedDeviceError) -> DeviceRecord? {
        try readTransaction { tx in try self.record(in: tx) }
    }

    /// The applied policy, `nil` when the device is not provisioned.
    public func policy() throws(SharedDeviceError) -> DevicePolicy? {
        try record()?.policy()
    }

    /// The app's identity under the device policy: its entitled access groups.
    /// - Returns: `nil` when the device is not provisioned (the caller decides the entitlements).
    /// - Throws: `appNotInPolicy` for an app the policy does not list; the refusal is audited
    ///   (`keychain.access_denied`).
    public func appIdentity(_ appID: String, actor: String) throws(SharedDeviceError) -> AppIdentity? {
        guard let policy = try policy() else { return nil }
        guard let app = policy.app(appID) else {
            logger.debug("app not in device policy refused", metadata: ["app": "\(appID)", "actor": "\(actor)"])
            try recordAccessDenied(appID: appID, actor: actor, reason: "app not in device policy", details: [:])
            throw SharedDeviceError(
                .appNotInPolicy,
                "app \(appID) is not listed in the device policy, so it has no keychain access on this device; add it to the policy's apps and run `devicectl provision` again"
            )
        }
        do {
            return try AppIdentity(appID: app.id, accessGroups: app.accessGroups)
        } catch {
            throw SharedDeviceError.wrapping(error)
        }
    }

    /// Records a `keychain.access_denied` event (an app asked for a group it is not entitled to, or is
    /// not in the policy). Does nothing on a device that is not provisioned.
    public func recordAccessDenied(
        appID: String,
        actor: String,
        reason: String,
        details: [String: String]
    ) throws(SharedDeviceError) {
        var details = details
        details["app"] = appID
        try record(AuditEntry(type: .keychainAccessDenied, actor: actor, reason: reason, details: details))
    }

    // MARK: - Audit log

    /// Appends an event in its own transaction, signing a checkpoint per the policy (or when asked).
    /// Does nothing and returns `nil` on a device that is not provisioned: there is no key to vouch for it.
    @discardableResult
    public func record(_ entry: AuditEntry, checkpoint: Bool = false) throws(SharedDeviceError) -> AuditEvent? {
        try transaction { tx -> AuditEvent? in try self.append(entry, in: tx, checkpoint: checkpoint) }
    }

    /// Appends an event inside a caller's transaction (the account manager's sign-outs), with the
    /// device's signer. Returns `nil` on a device that is not provisioned.
    @discardableResult
    public func append(
        _ entry: AuditEntry,
        in transaction: StoreTransaction,
        checkpoint: Bool = false
    ) throws -> AuditEvent? {
        guard let record = try record(in: transaction) else { return nil }
        return try append(entry, in: transaction, record: record, checkpoint: checkpoint)
    }

    /// `append(_:in:checkpoint:)` when the caller has already read the device record in this transaction.
    @discardableResult
    func append(
        _ entry: AuditEntry,
        in transaction: StoreTransaction,
        record: DeviceRecord?,
        checkpoint: Bool
    ) throws -> AuditEvent? {
        guard let record else { return nil }
        return try appendAnnounced(
            entry,
            in: transaction,
            signer: try signer(for: record, in: transaction),
            checkpoint: checkpoint
        )
    }

    /// `AuditLog.append`, and the event to `committedAuditEvents`' listeners once `transaction` commits.
    @discardableResult
    private func appendAnnounced(
        _ entry: AuditEntry,
        in transaction: StoreTransaction,
        signer: AuditLog.Signer?,
        checkpoint: Bool
    ) throws -> AuditEvent {
        let event = try AuditLog.append(entry, in: transaction, signer: signer, checkpoint: checkpoint)
        committedAuditEvents.announce(event, after: transaction)
        return event
    }

    /// The device record (`nil` when not provisioned), decoded once per record content.
    func record(in transaction: StoreTransaction) throws -> DeviceRecord? {
        try DeviceRecordStore.record(in: transaction, decodedBy: decodedRecord)
    }

    /// Every access group of the record's policy's apps, decoded once per policy document.
    func appGroups(of record: DeviceRecord) throws -> AppGroups {
        try decodedAppGroups.value(for: record.policySHA256) {
            let groups = Set(try record.policy().apps.flatMap(\.accessGroups))
            return AppGroups(sorted: groups.sorted(), set: groups)
        }
    }

    /// The signer for the current record: the cached one while the policy (its interval) and key are unchanged.
    private func signer(for record: DeviceRecord, in transaction: StoreTransaction) throws -> AuditLog.Signer {
        if let cached = cachedSigner.withLock({ $0 }), cached.policySHA256 == record.policySHA256,
            cached.signer.key.publicKey == record.auditPublicKey
        {
            return cached.signer
        }
        let signer = try DeviceRecordStore.signer(for: record, in: transaction)
        cachedSigner.withLock { $0 = (signer, record.policySHA256) }
        return signer
    }

    /// The audit events matching `filter`, oldest first.
    public func auditEvents(matching filter: AuditFilter = AuditFilter()) throws(SharedDeviceError) -> [AuditEvent] {
        try readTransaction { tx in try AuditLog.events(matching: filter, in: tx) }
    }

    /// The audit events matching `filter` and the log's newest sequence number, from one snapshot:
    /// continue with `afterSequence = lastSequence` to follow the log without missing an event.
    public func auditPage(
        matching filter: AuditFilter = AuditFilter()
    ) throws(SharedDeviceError) -> (events: [AuditEvent], lastSequence: Int64) {
        try readTransaction { tx in (try AuditLog.events(matching: filter, in: tx), try AuditLog.lastSequence(in: tx)) }
    }

    /// The newest audit sequence number (0 for an empty log), for following the log.
    public func lastAuditSequence() throws(SharedDeviceError) -> Int64 {
        try readTransaction { tx in try AuditLog.lastSequence(in: tx) }
    }

    /// Verifies the whole audit log against the keys this device recorded (see `AuditLog.verify`).
    public func verifyAudit() throws(SharedDeviceError) -> AuditVerification {
        try readTransaction { tx in
            let anchor = try DeviceRecordStore.anchor(in: tx)
            let trusted = anchor.map { Set($0.publicKeys) }
            return try AuditLog.verify(in: tx, trustedKeys: trusted, expectsEvents: anchor != nil)
        }
    }

    /// Whether `error` means the device's own records are damaged (as opposed to the store failing).
    ///
    /// (Written with `if let … as?` rather than a `switch` expression over `case let … as`: Swift 6.3.1
    /// crashes compiling that form with optimisation, "Found outside of lifetime use", in release builds.)
    private static func isDamage(_ error: any Error) -> Bool {
        if let error = error as? SharedDeviceError {
            return error.code == .deviceRecordDamaged || error.storeError?.code == .integrityFailure
        }
        if let error = error as? KeychainError {
            return error.code == .integrityFailure || error.code == .corruptStore
        }
        return false
    }

    // MARK: - Transactions

    private func transaction<T>(_ body: @escaping (StoreTransaction) throws -> T) throws(SharedDeviceError) -> T {
        try sharedDeviceErrors { try store.writeTransaction(body) }
    }

    /// A write that must work on a full disk (deprovisioning): see `KeychainStore.essentialWriteTransaction`.
    private func essentialTransaction<T>(
        _ body: @escaping (StoreTransaction) throws -> T
    ) throws(SharedDeviceError) -> T {
        try sharedDeviceErrors { try store.essentialWriteTransaction(body) }
    }

    private func readTransaction<T>(_ body: @escaping (StoreTransaction) throws -> T) throws(SharedDeviceError) -> T {
        try sharedDeviceErrors { try store.readTransaction(body) }
    }
}

extension Data {
    /// Lowercase hex, for key fingerprints in audit details.
    var hexString: String { Hex.encode(self) }
}
