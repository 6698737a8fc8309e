import Foundation
import GRDB
import KeychainStore
import ProcessTestSupport
import SharedDevice
import StoreTestSupport
import Synchronization
import Testing

// The scratch directory, the fake clock and raw database access come from StoreTestSupport (shared with
// the store's tests); the audit tables' raw access is added here.

// MARK: - State directory and clock

/// Opens a store in `directory` with fast commits and the fake clock.
func openStore(
    _ directory: TemporaryStateDirectory,
    key: MasterKeySource? = nil,
    clock: FakeClock? = nil
) throws -> KeychainStore {
    var options = StoreOptions(synchronous: .normal)
    if let clock { options.clock = clock.function }
    return try KeychainStore(directory: directory.url, key: key, options: options)
}

/// A device on a fresh store: the directory lives as long as the fixture, so keep the fixture in a local.
final class DeviceFixture {
    static let admin = "devicectl (uid 0 root)"

    let directory: TemporaryStateDirectory
    let clock: FakeClock
    let store: KeychainStore
    let device: ManagedDevice

    init() throws {
        directory = TemporaryStateDirectory()
        clock = FakeClock()
        store = try openStore(directory, clock: clock)
        device = ManagedDevice(store: store)
    }

    /// Another process's view: a second store object and device on the same directory and clock.
    func secondDevice() throws -> ManagedDevice {
        ManagedDevice(store: try openStore(directory, clock: clock))
    }

    func raw() throws -> RawDatabase { try RawDatabase(path: directory.databasePath) }

    @discardableResult
    func provision(
        _ document: Data,
        force: Bool = false
    ) throws -> (outcome: ManagedDevice.ProvisioningOutcome, record: DeviceRecord) {
        try device.provision(policyDocument: document, force: force, actor: Self.admin)
    }

    /// Every access group that holds a key, by name (the administrator's view through a transaction).
    func accessGroupNames() throws -> [String] {
        try store.readTransaction { tx in try tx.accessGroupNames() }
    }

    /// The device's own items (record, audit signing key), as the device administrator reads them.
    func deviceItems() throws -> [KeychainItem] {
        try store.findAll(ItemQuery(accessGroup: AccessGroup.device), as: .deviceAdministrator)
    }

    /// The item holding the device record: the one whose secret is the record's JSON.
    func deviceRecordItem() throws -> KeychainItem {
        try #require(try deviceItems().first { String(decoding: $0.secret, as: UTF8.self).contains("\"deviceID\"") })
    }

    /// The item holding the Ed25519 audit signing key: 64 bytes ending with the recorded public key.
    func signingKeyItem() throws -> KeychainItem {
        let record = try #require(try device.record())
        return try #require(
            try deviceItems().first { $0.secret.count == 64 && $0.secret.suffix(32) == record.auditPublicKey }
        )
    }

    /// Appends `count` sign-in events for `account`, one clock second apart.
    @discardableResult
    func recordEvents(_ count: Int, account: String = "worker@contoso.com") throws -> [AuditEvent] {
        var events: [AuditEvent] = []
        for index in 0..<count {
            clock.advance(by: 1)
            let event = try device.record(
                AuditEntry(
                    type: AuditEventType("account.signed_in"),
                    actor: "com.contoso.kiosk.scanner",
                    account: account,
                    reason: "test \(index)"
                )
            )
            events.append(try #require(event))
        }
        return events
    }
}

// MARK: - Policies

/// The repository's policy files and edited copies of them.
enum Policies {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("policies")

    /// The file's bytes, exactly as shipped.
    static func file(_ name: String) throws -> Data {
        try Data(contentsOf: directory.appendingPathComponent(name))
    }

    static func kiosk() throws -> Data { try file("kiosk.json") }
    static func personal() throws -> Data { try file("personal.json") }

    /// The policy file `name` after `edit`, re-serialised (so its bytes and hash differ from the file's).
    static func edited(_ name: String = "kiosk.json", by edit: (inout [String: Any]) -> Void) throws -> Data {
        var document = try #require(try JSONSerialization.jsonObject(with: try file(name)) as? [String: Any])
        edit(&document)
        return try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .prettyPrinted])
    }

    static func setMode(_ mode: String) -> (inout [String: Any]) -> Void {
        { document in
            var device = document["device"] as! [String: Any]
            device["mode"] = mode
            document["device"] = device
        }
    }

    static func setName(_ name: String) -> (inout [String: Any]) -> Void {
        { document in
            var device = document["device"] as! [String: Any]
            device["name"] = name
            document["device"] = device
        }
    }

    static func removeApp(_ id: String) -> (inout [String: Any]) -> Void {
        { document in
            document["apps"] = (document["apps"] as! [[String: Any]]).filter { $0["id"] as? String != id }
        }
    }

    static func setCheckpointInterval(_ interval: Int) -> (inout [String: Any]) -> Void {
        { document in document["audit"] = ["checkpointInterval": interval] }
    }

    /// Several edits in order.
    static func all(_ edits: ((inout [String: Any]) -> Void)...) -> (inout [String: Any]) -> Void {
        { document in for edit in edits { edit(&document) } }
    }
}

/// The kiosk policy's apps, as the policy entitles them.
enum KioskApps {
    static let scannerID = AccountWorkerFixture.scannerID
    static let timeclockID = AccountWorkerFixture.timeclockID
    static let scannerGroup = AccountWorkerFixture.scannerGroup
    static let timeclockGroup = AccountWorkerFixture.timeclockGroup
    static let scanner = try! AppIdentity(appID: scannerID, accessGroups: [scannerGroup, AccessGroup.adalCache])
    static let timeclock = try! AppIdentity(appID: timeclockID, accessGroups: [timeclockGroup, AccessGroup.adalCache])
}

// MARK: - Errors

/// The error `body` throws, or `nil` if it succeeds. (A helper rather than `do … catch let e as T`, which
/// crashes the Swift 6.3.1 compiler around typed throws.)
func caughtError<T>(_ body: () throws -> T) -> (any Error)? {
    do {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

/// Expects `body` to throw a `SharedDeviceError` with `code`; returns it.
@discardableResult
func expectSharedDeviceError<T>(
    _ code: SharedDeviceError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> T
) -> SharedDeviceError? {
    guard let error = caughtError(body) else {
        Issue.record("expected \(code), but the call succeeded", sourceLocation: sourceLocation)
        return nil
    }
    guard let shared = error as? SharedDeviceError else {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
    #expect(shared.code == code, "\(shared)", sourceLocation: sourceLocation)
    return shared
}

/// Expects `body` to throw a `KeychainError` with `code`.
func expectKeychainError<T>(
    _ code: KeychainError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> T
) {
    let error = caughtError(body)
    #expect(
        (error as? KeychainError)?.code == code,
        "expected \(code), got \(error.map { "\($0)" } ?? "success")",
        sourceLocation: sourceLocation
    )
}

// MARK: - Independent checks

/// SHA-256 of `data` as computed by coreutils' `sha256sum`, independently of the code under test.
func sha256sum(_ data: Data) throws -> String {
    let input = FileManager.default.temporaryDirectory.appendingPathComponent("sha-input-\(UUID().uuidString)")
    try data.write(to: input)
    defer { try? FileManager.default.removeItem(at: input) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
    process.arguments = [input.path]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let bytes = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    try #require(process.terminationStatus == 0)
    let text = String(decoding: bytes, as: UTF8.self)
    return String(try #require(text.split(separator: " ").first))
}

extension Data {
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}

/// The audit chain as documented in AuditChain.swift, reimplemented to check and to forge chain values:
/// `chain_i = BLAKE2b-256(chain_{i-1} || sequence (8 bytes BE) || each field as 4-byte BE length + UTF-8,
/// with a presence byte before account and reason)`, from 32 zero bytes.
enum ChainModel {
    static let genesis = Data(count: 32)

    static func next(after previous: Data, _ row: RawDatabase.EventRow) throws -> Data {
        var bytes: [UInt8] = []
        bigEndian(UInt64(bitPattern: row.sequence), bytes: 8, &bytes)
        field(row.time, &bytes)
        field(row.type, &bytes)
        field(row.actor, &bytes)
        optionalField(row.account, &bytes)
        optionalField(row.reason, &bytes)
        field(row.correlationID, &bytes)
        field(row.details, &bytes)
        return try ChainHash.next(previous: previous, message: bytes)
    }

    /// What a checkpoint's Ed25519 signature covers.
    static func checkpointMessage(sequence: Int64, chain: Data) -> Data {
        var bytes = Array("devicectl audit checkpoint v1".utf8)
        bigEndian(UInt64(bitPattern: sequence), bytes: 8, &bytes)
        return Data(bytes) + chain
    }

    private static func bigEndian(_ value: UInt64, bytes count: Int, _ bytes: inout [UInt8]) {
        for index in (0..<count).reversed() { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(index * 8))) }
    }

    private static func field(_ text: String, _ bytes: inout [UInt8]) {
        bigEndian(UInt64(text.utf8.count), bytes: 4, &bytes)
        bytes.append(contentsOf: text.utf8)
    }

    private static func optionalField(_ text: String?, _ bytes: inout [UInt8]) {
        guard let text else { return bytes.append(0) }
        bytes.append(1)
        field(text, &bytes)
    }
}

// MARK: - Raw database

/// The audit tables, read and edited as an attacker with file access would.
extension RawDatabase {
    // Audit tables.

    struct EventRow: Equatable {
        var sequence: Int64
        var time: String
        var type: String
        var actor: String
        var account: String?
        var reason: String?
        var correlationID: String
        var details: String
        var chain: Data
    }

    struct CheckpointRow: Equatable {
        var sequence: Int64
        var chain: Data
        var publicKey: Data
        var signature: Data
    }

    struct HeadRow: Equatable {
        var sequence: Int64
        var chain: Data
        var tag: Data
    }

    func events() throws -> [EventRow] {
        try queue.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT sequence, time, type, actor, account, reason, correlation_id, details, chain FROM audit_events ORDER BY sequence
                    """
            ).map {
                EventRow(
                    sequence: $0[0],
                    time: $0[1],
                    type: $0[2],
                    actor: $0[3],
                    account: $0[4],
                    reason: $0[5],
                    correlationID: $0[6],
                    details: $0[7],
                    chain: $0[8]
                )
            }
        }
    }

    func checkpoints() throws -> [CheckpointRow] {
        try queue.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT sequence, chain, public_key, signature FROM audit_checkpoints ORDER BY sequence"
            ).map {
                CheckpointRow(sequence: $0[0], chain: $0[1], publicKey: $0[2], signature: $0[3])
            }
        }
    }

    func head() throws -> HeadRow? {
        try queue.read { db in
            try Row.fetchOne(db, sql: "SELECT sequence, chain, tag FROM audit_head WHERE id = 1").map {
                HeadRow(sequence: $0[0], chain: $0[1], tag: $0[2])
            }
        }
    }

    /// Writes every column of `row` to the event with `row.sequence`.
    func write(_ row: EventRow) throws {
        try execute(
            """
            UPDATE audit_events SET time = ?, type = ?, actor = ?, account = ?, reason = ?, correlation_id = ?, details = ?, chain = ?
            WHERE sequence = ?
            """,
            [
                row.time, row.type, row.actor, row.account, row.reason, row.correlationID, row.details, row.chain,
                row.sequence,
            ]
        )
    }

    /// Recomputes the chain value of every event from `sequence` on, as an attacker covering an edit would.
    func rechain(from sequence: Int64) throws {
        let rows = try events()
        var previous = rows.last { $0.sequence < sequence }?.chain ?? ChainModel.genesis
        for var row in rows where row.sequence >= sequence {
            row.chain = try ChainModel.next(after: previous, row)
            try write(row)
            previous = row.chain
        }
    }
}
