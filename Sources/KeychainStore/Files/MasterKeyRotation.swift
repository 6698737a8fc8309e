public import Foundation
import GRDB
public import Logging
import PathSafety
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// What a master-key rotation did.
public struct MasterKeyRotationResult: Sendable, Equatable {
    /// The access groups whose keys were re-wrapped under the new master key.
    public var groups: Int
    /// How the new key is held: sealed like the old one (`nil`: a key file).
    public var sealing: KeySealing?
}

/// Replaces the store's master key with a new random one, held the way the old one was (the key file
/// `master.key`, or sealed with the same binding and PCRs as `master.key.cred`).
///
/// The store's data does not move: its group keys are re-wrapped under the new key, and the blind-index and
/// integrity keys the old key gave are kept, sealed under the new one (`MasterKeyring.rewrap`), all in one
/// SQLite transaction. The database and the key file are two files, so the new key goes to disk first, as
/// `master.key.next` (or `master.key.cred.next`, checked by decrypting it), then the transaction commits,
/// then the pending key is renamed over the old one. Killed at any point the store opens: before the
/// commit with the old key (the pending one is stale and removed by the next rotation), after it with the
/// pending key, which the next open renames into place (`unlock`).
///
/// Nothing else may use the store meanwhile (a process holding the old key would wrap a new group under
/// it): the rotation holds the state directory's lock (`StateDirectoryLock`), which a serving deviced holds.
public enum MasterKeyRotation {
    /// The suffix of a new key not yet in place.
    static let pendingSuffix = ".next"

    /// The steps a rotation reports as it passes them.
    public enum Step: String, Sendable {
        /// The new key is on disk beside the old one (`.next`); the store is still under the old key.
        case pendingKeyWritten = "pending-key-written"
        /// The transaction committed: the store is under the new key, which is not yet in place.
        case committed
    }

    /// Rotates the master key of `store` (opened with its key file or sealed key, which finished any rotation
    /// that committed and was cut off before its key was in place). Use the store no more afterwards: it
    /// holds the old keys.
    /// - Throws: `storeBusy` when deviced (or another rotation) holds the state directory; `wrongKey` when
    ///   the current key does not open the store, when the store is protected by a passphrase, or when the
    ///   new sealed key does not decrypt here; `ioError`. Nothing is changed then.
    /// - Parameters:
    ///   - resealing: for a sealed key, how to seal the new one when not as the old one (the policy names
    ///     other PCRs); a key file cannot be resealed here (`SealedKeyFile.seal` first).
    ///   - recording: runs inside the rotation's transaction with the store and the number of group keys
    ///     re-wrapped (an audit entry: it commits with the rotation or not at all); a throw rolls it back.
    ///   - passed: called after each step (a caller's progress report).
    public static func rotate(
        _ store: KeychainStore,
        resealing: KeySealing? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger = Logger.current,
        recording: @escaping (KeychainStore, StoreTransaction, Int) throws -> Void = { _, _, _ in },
        passed: (Step) -> Void = { _ in }
    ) throws(KeychainError) -> MasterKeyRotationResult {
        let directory = store.stateDirectory
        let lock: StateDirectoryLock
        do {
            lock = try StateDirectoryLock(held: directory)
        } catch {
            guard let holder = error.holder else { throw KeychainError(.ioError, error.description) }
            throw KeychainError(
                .storeBusy,
                """
                pid \(holder) holds the state directory \(directory.path) (deviced serving it, or another rotation); \
                nothing was changed. Stop deviced first (systemctl stop deviced.socket deviced.service), rotate, then start deviced.socket again
                """
            )
        }
        defer { withExtendedLifetime(lock) {} }
        let currentSealing = SealedKeyFile.sealing(in: directory)
        let current = KeyFile.Location(
            directory: directory,
            name: currentSealing == nil ? KeychainStore.keyFileName : SealedKeyFile.fileName
        )
        guard current.exists else {
            throw KeychainError(
                .wrongKey,
                "the store in \(directory.path) has no key file (\(KeychainStore.keyFileName)) or sealed key (\(SealedKeyFile.fileName)) to rotate; a store protected by a passphrase keeps it"
            )
        }
        if resealing != nil && currentSealing == nil {
            throw KeychainError(
                .wrongKey,
                "the store's key is a key file, not sealed; seal it first (devicectl key seal); nothing was changed"
            )
        }
        let sealing = resealing ?? currentSealing
        let pending = pendingLocation(of: current)
        let sealingFile = pendingLocation(of: current.sibling(SealedKeyFile.sealingFileName))
        // A pending key that is still here belongs to a rotation that never committed.
        try? removePending(pending)
        try? removePending(sealingFile)
        let newKey = try SecureKey.random()
        if let sealing {
            try SealedKeyFile.write(newKey, sealedWith: sealing, to: pending, environment: environment)
            if sealing != currentSealing {
                do throws(Errno) {
                    try directory.replace(sealingFile.name, with: Array((try? JSONEncoder().encode(sealing)) ?? Data()))
                } catch {
                    try? removePending(pending)
                    throw KeychainError(.ioError, "cannot write \(sealingFile.path): \(error); nothing was changed")
                }
            }
        } else {
            try KeyFile.create(newKey, at: pending)
        }
        directory.sync()
        passed(.pendingKeyWritten)
        let groups: Int
        do {
            groups = try store.rewrapMasterKey(to: newKey, recording: recording)
        } catch {
            try? removePending(pending)
            throw error
        }
        passed(.committed)
        try promote(pending, over: current)
        logger.debug(
            "keychain store master key rotated",
            metadata: ["path": "\(directory.path)", "groups": "\(groups)"]
        )
        return MasterKeyRotationResult(groups: groups, sealing: sealing)
    }

    /// Opens the store's keyring with `source`; when that key no longer opens it and the pending key of an
    /// interrupted rotation does, puts the pending key in place and opens with it. The pending key is
    /// reached like the key: relative to its held directory, never through a symbolic link.
    static func unlock(
        _ database: some DatabaseWriter,
        source: HeldKeySource,
        directory: SafeDirectory
    ) throws -> MasterKeyring {
        do {
            return try MasterKeyring.unlock(database, source: source)
        } catch let error as KeychainError where error.code == .wrongKey {
            if let current = source.location, pendingLocation(of: current).exists {
                let pending = pendingLocation(of: current)
                let pendingSource: HeldKeySource =
                    if case .sealedKeyFile = source { .sealedKeyFile(pending) } else { .keyFile(pending) }
                guard let keyring = try? MasterKeyring.unlock(database, source: pendingSource) else { throw error }
                try promote(pending, over: current)
                return keyring
            }
            // The key systemd decrypted for the service is the old one: only root's devicectl can finish.
            if [SealedKeyFile.fileName, KeychainStore.keyFileName].contains(where: {
                (try? directory.status(of: $0 + pendingSuffix)) != nil
            }) {
                throw KeychainError(
                    .wrongKey,
                    "a rotation of the store's master key in \(directory.path) was interrupted after it committed; run `devicectl key rotate` as root to finish it (it puts the new key in place), then start deviced again"
                )
            }
            throw error
        }
    }

    static func pendingLocation(of current: KeyFile.Location) -> KeyFile.Location {
        current.sibling(current.name + pendingSuffix)
    }

    /// Renames the pending key over the current one (`renameat` in their held directory: a link at either
    /// name is replaced, never followed) and makes the rename durable; a pending key already renamed (by
    /// another process finishing the rotation) is no error.
    private static func promote(_ pending: KeyFile.Location, over current: KeyFile.Location) throws(KeychainError) {
        let directory = current.directory
        do throws(Errno) {
            try directory.rename(pending.name, to: current.name)
        } catch {
            if error == .noSuchFileOrDirectory { return }
            throw KeychainError(
                .ioError,
                "cannot put the new master key \(pending.path) in place of \(current.path): \(error); the store opens with it: run `devicectl key rotate` again to finish"
            )
        }
        // A new sealing's description follows its key (it only describes it: a crash between the two leaves
        // the old description, which the next rotation writes again).
        if current.name == SealedKeyFile.fileName {
            try? directory.rename(SealedKeyFile.sealingFileName + pendingSuffix, to: SealedKeyFile.sealingFileName)
        }
        directory.sync()
    }

    /// Removes a pending file: a pending key file overwritten with zeros first (`KeyFile.destroy`); a link
    /// there is removed, never followed.
    private static func removePending(_ location: KeyFile.Location) throws(KeychainError) {
        guard let info = try? location.directory.status(of: location.name) else { return }
        if location.name == KeychainStore.keyFileName + pendingSuffix && info.type == .regular {
            try KeyFile.destroy(location)
        } else {
            do throws(Errno) {
                try location.directory.remove(location.name)
            } catch {
                throw KeychainError(.ioError, "cannot remove \(location.path): \(error)")
            }
        }
    }
}

extension KeychainStore {
    /// Puts the store under `newKey` in one transaction (`MasterKeyring.rewrap`). This instance holds the
    /// old keys afterwards: close it.
    func rewrapMasterKey(
        to newKey: SecureKey,
        recording: @escaping (KeychainStore, StoreTransaction, Int) throws -> Void
    ) throws(KeychainError) -> Int {
        do {
            return try writeTransaction { transaction in
                let groups = try self.core.keyring.rewrap(
                    under: newKey,
                    groupKeys: self.core.groupKeys,
                    transaction.database
                )
                try recording(self, transaction, groups)
                return groups
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.ioError, "the rotation's transaction failed: \(error); nothing was changed")
        }
    }
}
