import Foundation
import GRDB
import KeychainStore
import SharedDevice
import StoreTestSupport
import Testing

/// Edits to the audit tables made with raw SQL, by someone with the database file but not the master key,
/// must make `verifyAudit` report the log as not intact and name the first bad event; appends must refuse
/// to grow a log whose head is gone or fails its tag.
struct AuditTamperTests {
    /// A device whose checkpoint interval is 5, with 12 events: checkpoints at 1 (provisioning), 5 and 10.
    private func loggedDevice() throws -> (DeviceFixture, RawDatabase) {
        let fixture = try DeviceFixture()
        try fixture.provision(try Policies.edited(by: Policies.setCheckpointInterval(5)))
        try fixture.recordEvents(11)
        let raw = try fixture.raw()
        try #require(try raw.checkpoints().map(\.sequence) == [1, 5, 10])
        try #require(try raw.head()?.sequence == 12)
        return (fixture, raw)
    }

    private func expectTampered(
        _ fixture: DeviceFixture,
        firstBad: Int64?,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let verification = try fixture.device.verifyAudit()
        #expect(!verification.isIntact, "tampering went unnoticed", sourceLocation: sourceLocation)
        #expect(verification.firstBadSequence == firstBad, "\(verification.problems)", sourceLocation: sourceLocation)
    }

    /// Appending is refused and writes nothing.
    private func expectAppendRefused(_ fixture: DeviceFixture, sourceLocation: SourceLocation = #_sourceLocation) throws
    {
        let before = try fixture.raw().dump()
        expectSharedDeviceError(.auditLogTampered, sourceLocation: sourceLocation) {
            try fixture.device.record(AuditEntry(type: AuditEventType("account.signed_in"), actor: KioskApps.scannerID))
        }
        // A fresh device (no cached signer) refuses too.
        expectSharedDeviceError(.auditLogTampered, sourceLocation: sourceLocation) {
            try fixture.secondDevice().record(
                AuditEntry(type: AuditEventType("account.signed_in"), actor: KioskApps.scannerID),
                checkpoint: true
            )
        }
        #expect(try fixture.raw().dump() == before, sourceLocation: sourceLocation)
    }

    @Test func anUntouchedLogVerifiesIntact() throws {
        let (fixture, raw) = try loggedDevice()
        let verification = try fixture.device.verifyAudit()
        #expect(verification.isIntact, "\(verification.problems)")
        #expect(verification.firstBadSequence == nil)
        #expect(verification.eventCount == 12)
        #expect(verification.checkpointCount == 3)
        #expect(verification.headSequence == 12)
        #expect(verification.headChain == (try raw.head()?.chain.hex))
    }

    struct FieldEdit: Sendable, CustomTestStringConvertible {
        let column: String
        let value: String?
        var testDescription: String { "\(column) = \(value ?? "NULL")" }
    }

    @Test(arguments: [
        FieldEdit(column: "time", value: "2027-01-01T00:00:00.000Z"),
        FieldEdit(column: "type", value: "account.signed_out"),
        FieldEdit(column: "actor", value: "com.fabrikam.intruder"),
        FieldEdit(column: "account", value: "mallory@contoso.com"),
        FieldEdit(column: "account", value: nil),
        FieldEdit(column: "reason", value: nil),
        FieldEdit(column: "correlation_id", value: "00000000-0000-0000-0000-000000000000"),
        FieldEdit(column: "details", value: "{\"app\":\"x\"}"),
    ])
    func editingAFieldOfAnEventNamesThatEvent(edit: FieldEdit) throws {
        let (fixture, raw) = try loggedDevice()
        try raw.execute("UPDATE audit_events SET \(edit.column) = ? WHERE sequence = 7", [edit.value])
        try expectTampered(fixture, firstBad: 7)
        #expect(try fixture.device.verifyAudit().problems.map(\.sequence) == [7])
    }

    @Test(arguments: [1, 3, 10, 12] as [Int64])
    func editingTheActorOfEventKNamesEventK(k: Int64) throws {
        // 1 and 10 carry checkpoints, 12 is the newest (the head's event).
        let (fixture, raw) = try loggedDevice()
        try raw.execute("UPDATE audit_events SET actor = 'com.fabrikam.intruder' WHERE sequence = ?", [k])
        try expectTampered(fixture, firstBad: k)
    }

    @Test
    func appendingHiddenBytesAfterANulInAFieldNamesTheEvent() throws {
        // A reader that stops at the NUL would see the original text; the chain covers every byte.
        let (fixture, raw) = try loggedDevice()
        try raw.execute("UPDATE audit_events SET reason = reason || char(0) || 'hidden' WHERE sequence = ?", [4])
        try expectTampered(fixture, firstBad: 4)
    }

    @Test
    func aGenuineFieldWithANulIsStoredWithAReplacementCharacterAndVerifies() throws {
        let (fixture, _) = try loggedDevice()
        try fixture.device.record(
            AuditEntry(type: .keychainAccessDenied, actor: "com.contoso.kiosk.scanner", reason: "odd\u{0}reason")
        )
        #expect(try fixture.device.verifyAudit().isIntact)
        #expect(try fixture.device.auditEvents().last?.reason == "odd\u{FFFD}reason")
    }

    @Test(arguments: [2, 7, 9] as [Int64])
    func deletingAMiddleEventNamesIt(k: Int64) throws {
        // 9 is just before a checkpoint.
        let (fixture, raw) = try loggedDevice()
        try raw.execute("DELETE FROM audit_events WHERE sequence = ?", [k])
        try expectTampered(fixture, firstBad: k)
        #expect(try fixture.device.verifyAudit().eventCount == 11)
    }

    @Test(arguments: [(3, 7), (2, 3), (9, 10), (11, 12)] as [(Int64, Int64)])
    func reorderingTwoEventsNamesTheEarlierPosition(a: Int64, b: Int64) throws {
        let (fixture, raw) = try loggedDevice()
        let rows = try raw.events()
        var first = try #require(rows.first { $0.sequence == a })
        var second = try #require(rows.first { $0.sequence == b })
        // each row's whole content, chain value included, moves to the other's place
        (first.sequence, second.sequence) = (b, a)
        try raw.write(first)
        try raw.write(second)
        try #require(try raw.events().map(\.sequence) == Array(1...12))
        try expectTampered(fixture, firstBad: a)
    }

    @Test(arguments: [12, 11, 10, 3] as [Int64])
    func truncatingTheNewestEventsWithTheHeadLeftAloneNamesTheFirstDeleted(from k: Int64) throws {
        let (fixture, raw) = try loggedDevice()
        try raw.execute("DELETE FROM audit_events WHERE sequence >= ?", [k])
        try expectTampered(fixture, firstBad: k)
        #expect(try fixture.device.verifyAudit().headSequence == 12)
    }

    @Test(arguments: [11, 10] as [Int64])
    func truncatingAndRewritingTheHeadToTheNewLastEventFailsTheHeadsTag(keeping last: Int64) throws {
        let (fixture, raw) = try loggedDevice()
        try raw.execute("DELETE FROM audit_events WHERE sequence > ?", [last])
        try raw.execute("DELETE FROM audit_checkpoints WHERE sequence > ?", [last])
        let newLast = try #require(try raw.events().last)
        try raw.execute(
            "UPDATE audit_head SET sequence = ?, chain = ? WHERE id = 1",
            [newLast.sequence, newLast.chain]
        )

        let verification = try fixture.device.verifyAudit()
        #expect(!verification.isIntact)
        #expect(
            verification.problems.contains { $0.sequence == nil && $0.message.contains("head") },
            "\(verification.problems)"
        )
        try expectAppendRefused(fixture)
    }

    @Test func deletingTheHeadIsReportedAndStopsAppends() throws {
        let (fixture, raw) = try loggedDevice()
        try raw.execute("DELETE FROM audit_head")
        let verification = try fixture.device.verifyAudit()
        #expect(!verification.isIntact)
        #expect(
            verification.problems.contains { $0.message.contains("head record is missing") },
            "\(verification.problems)"
        )
        try expectAppendRefused(fixture)
    }

    @Test(arguments: [
        "UPDATE audit_head SET sequence = 11", "UPDATE audit_head SET chain = zeroblob(32)",
        "UPDATE audit_head SET tag = zeroblob(32)", "UPDATE audit_head SET sequence = 13",
    ])
    func anAlteredHeadIsReportedAndStopsAppends(sql: String) throws {
        let (fixture, raw) = try loggedDevice()
        try raw.execute(sql)
        let verification = try fixture.device.verifyAudit()
        #expect(!verification.isIntact)
        #expect(
            verification.problems.contains { $0.sequence == nil && $0.message.contains("head") },
            "\(verification.problems)"
        )
        try expectAppendRefused(fixture)
    }

    @Test func deletingEveryEventCheckpointAndTheHeadIsStillReported() throws {
        let (fixture, raw) = try loggedDevice()
        try raw.execute("DELETE FROM audit_events")
        try raw.execute("DELETE FROM audit_checkpoints")
        try raw.execute("DELETE FROM audit_head")
        // The audit anchor (in the store, sealed) says this device has a log.
        let verification = try fixture.device.verifyAudit()
        #expect(!verification.isIntact)
        #expect(verification.eventCount == 0)
        // Also after deprovisioning, when only the anchor is left to say so.
        let (deprovisioned, deprovisionedRaw) = try loggedDevice()
        _ = try deprovisioned.device.deprovision(actor: DeviceFixture.admin)
        try deprovisionedRaw.execute("DELETE FROM audit_events")
        try deprovisionedRaw.execute("DELETE FROM audit_checkpoints")
        try deprovisionedRaw.execute("DELETE FROM audit_head")
        #expect(!(try deprovisioned.device.verifyAudit().isIntact))
    }

    @Test func droppingTheAuditTablesIsReported() throws {
        let (fixture, raw) = try loggedDevice()
        for table in ["audit_events", "audit_checkpoints", "audit_head"] { try raw.execute("DROP TABLE \(table)") }
        let verification = try fixture.device.verifyAudit()
        #expect(!verification.isIntact)
        #expect(verification.problems.contains { $0.message.contains("missing") }, "\(verification.problems)")
    }

    @Test(arguments: ["audit_head", "audit_events", "audit_checkpoints"])
    func droppingOneAuditTableIsReportedRatherThanFailingVerification(table: String) throws {
        let (fixture, raw) = try loggedDevice()
        try raw.execute("DROP TABLE \(table)")
        var verification: AuditVerification?
        let error = caughtError { verification = try fixture.device.verifyAudit() }
        #expect(error == nil, "verifyAudit threw instead of reporting")
        #expect(verification?.isIntact == false)
    }

    @Test(arguments: ["audit_head", "audit_events"])
    func droppingTheHeadOrEventsTableStopsAppendsAsTampering(table: String) throws {
        let (fixture, raw) = try loggedDevice()
        try raw.execute("DROP TABLE \(table)")
        try expectAppendRefused(fixture)
    }

    @Test func anEventInsertedAfterTheHeadIsReported() throws {
        let (fixture, raw) = try loggedDevice()
        var forged = try #require(try raw.events().last)
        let previous = forged.chain
        forged.sequence = 13
        forged.actor = "com.fabrikam.intruder"
        forged.chain = try ChainModel.next(after: previous, forged)
        try raw.execute(
            """
            INSERT INTO audit_events (sequence, time, type, actor, account, reason, correlation_id, details, chain)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                forged.sequence, forged.time, forged.type, forged.actor, forged.account, forged.reason,
                forged.correlationID,
                forged.details, forged.chain,
            ]
        )
        try expectTampered(fixture, firstBad: 13)
    }

    @Test(arguments: [3, 7, 11, 12] as [Int64])
    func editingAnEventAndRecomputingTheChainAfterItIsCaughtByTheCheckpointsOrTheHead(k: Int64) throws {
        let (fixture, raw) = try loggedDevice()
        try raw.execute("UPDATE audit_events SET account = 'mallory@contoso.com' WHERE sequence = ?", [k])
        try raw.rechain(from: k)
        // The forged chain is self-consistent: only the signatures and the head's tag can tell.
        var previous = ChainModel.genesis
        for row in try raw.events() {
            try #require(try row.chain == ChainModel.next(after: previous, row))
            previous = row.chain
        }
        let verification = try fixture.device.verifyAudit()
        #expect(!verification.isIntact)
        let firstBad = try #require(verification.firstBadSequence, "\(verification.problems)")
        #expect(firstBad <= k)
        #expect(firstBad > (k > 10 ? 10 : k > 5 ? 5 : 1))  // no earlier than just after the last good checkpoint
    }

    @Test func rechainingAndResigningTheCheckpointsWithAnotherKeyIsCaught() throws {
        let (fixture, raw) = try loggedDevice()
        try raw.execute("UPDATE audit_events SET actor = 'com.fabrikam.intruder' WHERE sequence = 3")
        try raw.rechain(from: 3)
        let attacker = try SigningKey.generate()
        let chains = Dictionary(uniqueKeysWithValues: try raw.events().map { ($0.sequence, $0.chain) })
        for checkpoint in try raw.checkpoints() {
            let chain = try #require(chains[checkpoint.sequence])
            try raw.execute(
                "UPDATE audit_checkpoints SET chain = ?, public_key = ?, signature = ? WHERE sequence = ?",
                [
                    chain, attacker.publicKey,
                    try attacker.signature(
                        for: ChainModel.checkpointMessage(sequence: checkpoint.sequence, chain: chain)
                    ),
                    checkpoint.sequence,
                ]
            )
        }
        let verification = try fixture.device.verifyAudit()
        #expect(!verification.isIntact)
        #expect(verification.problems.filter { $0.message.contains("never had") }.map(\.sequence) == [1, 5, 10])
        #expect(verification.firstBadSequence == 1)
    }

    @Test(arguments: [1, 5, 10] as [Int64])
    func anAlteredCheckpointSignatureIsReportedAtItsEvent(sequence: Int64) throws {
        let (fixture, raw) = try loggedDevice()
        let checkpoint = try #require(try raw.checkpoints().first { $0.sequence == sequence })
        var signature = checkpoint.signature
        signature[signature.startIndex + 10] ^= 0x01
        try raw.execute("UPDATE audit_checkpoints SET signature = ? WHERE sequence = ?", [signature, sequence])
        try expectTampered(fixture, firstBad: sequence)
        #expect(try fixture.device.verifyAudit().problems.contains { $0.message.contains("signature") })
    }

    @Test func anAlteredCheckpointChainValueIsReported() throws {
        let (fixture, raw) = try loggedDevice()
        try raw.execute("UPDATE audit_checkpoints SET chain = zeroblob(32) WHERE sequence = 5")
        try expectTampered(fixture, firstBad: 5)
    }
}
