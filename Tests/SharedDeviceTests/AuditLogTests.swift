import Foundation
import KeychainStore
import SharedDevice
import StoreTestSupport
import Testing

/// Appending to, reading and checkpointing the audit log of an intact device.
struct AuditLogTests {
    @Test func correlationIDsAreDistinctVersionFourUUIDsInLowercase() throws {
        let ids = (0..<1000).map { _ in CorrelationID.make() }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            let uuid = try #require(UUID(uuidString: id), "\(id)")
            #expect(id == uuid.uuidString.lowercased())
            #expect(uuid.uuid.6 >> 4 == 4 && uuid.uuid.8 >> 6 == 0b10, "\(id): not a version 4, RFC 4122 UUID")
        }
    }

    static let signedIn = AuditEventType("account.signed_in")
    static let signedOut = AuditEventType("account.signed_out")

    /// A device provisioned with the kiosk policy, its checkpoint interval set to `interval` when given.
    private func provisioned(checkpointInterval interval: Int? = nil) throws -> DeviceFixture {
        let fixture = try DeviceFixture()
        let document =
            try interval.map { try Policies.edited(by: Policies.setCheckpointInterval($0)) } ?? Policies.kiosk()
        try fixture.provision(document)
        return fixture
    }

    @Test func eventsGetConsecutiveSequenceNumbersAndTheClocksTime() throws {
        let fixture = try provisioned()
        fixture.clock.advance(by: 1.5)
        let signIn = try #require(
            try fixture.device.record(
                AuditEntry(
                    type: Self.signedIn,
                    actor: KioskApps.scannerID,
                    account: "alice@contoso.com",
                    reason: "user",
                    correlationID: "shift-1",
                    details: ["app": KioskApps.scannerID, "note": "a/b \"quoted\""]
                )
            )
        )
        fixture.clock.advance(by: 60)
        let signOut = try #require(
            try fixture.device.record(
                AuditEntry(
                    type: Self.signedOut,
                    actor: KioskApps.timeclockID,
                    account: "alice@contoso.com",
                    reason: "shift-end",
                    correlationID: "shift-1"
                )
            )
        )
        fixture.clock.advance(by: 0.25)
        let other = try #require(
            try fixture.device.record(
                AuditEntry(type: Self.signedIn, actor: KioskApps.scannerID, account: "bob@contoso.com")
            )
        )

        #expect([signIn.sequence, signOut.sequence, other.sequence] == [2, 3, 4])
        #expect(signIn.time == FakeClock.start.addingTimeInterval(1.5))
        #expect(signOut.time == FakeClock.start.addingTimeInterval(61.5))
        #expect(other.time == FakeClock.start.addingTimeInterval(61.75))
        #expect(other.reason == nil)
        #expect(UUID(uuidString: other.correlationID) != nil)  // a fresh correlation id by default

        let events = try fixture.device.auditEvents()
        #expect(events.map(\.sequence) == [1, 2, 3, 4])
        #expect(events.first?.type == .deviceProvisioned)
        #expect(events.first?.time == FakeClock.start)
        #expect(Array(events.dropFirst()) == [signIn, signOut, other])  // read back exactly as recorded
        #expect(try fixture.device.lastAuditSequence() == 4)

        // Another process's device continues the same sequence.
        let next = try fixture.secondDevice().record(
            AuditEntry(type: Self.signedOut, actor: KioskApps.scannerID, account: "bob@contoso.com")
        )
        #expect(next?.sequence == 5)
        #expect(try fixture.device.lastAuditSequence() == 5)
        #expect(try fixture.device.verifyAudit().isIntact)
    }

    @Test func filtersSelectByTypeTimeAccountAndSequence() throws {
        let fixture = try provisioned()
        let entries: [AuditEntry] = [
            AuditEntry(type: Self.signedIn, actor: KioskApps.scannerID, account: "alice"),
            AuditEntry(type: Self.signedOut, actor: KioskApps.scannerID, account: "alice", reason: "user"),
            AuditEntry(type: Self.signedIn, actor: KioskApps.timeclockID, account: "bob"),
            AuditEntry(type: .keychainAccessDenied, actor: "uid 1003", details: ["app": "com.fabrikam.intruder"]),
        ]
        for entry in entries {
            fixture.clock.advance(by: 10)
            try fixture.device.record(entry)
        }
        func sequences(_ filter: AuditFilter) throws -> [Int64] {
            try fixture.device.auditEvents(matching: filter).map(\.sequence)
        }
        let t0 = FakeClock.start

        #expect(try sequences(AuditFilter()) == [1, 2, 3, 4, 5])
        #expect(try sequences(AuditFilter(types: [Self.signedIn])) == [2, 4])
        #expect(try sequences(AuditFilter(types: [Self.signedIn, Self.signedOut])) == [2, 3, 4])
        #expect(try sequences(AuditFilter(types: [AuditEventType("account.never")])) == [])
        #expect(try sequences(AuditFilter(since: t0.addingTimeInterval(20))) == [3, 4, 5])  // bounds are inclusive
        #expect(try sequences(AuditFilter(until: t0.addingTimeInterval(20))) == [1, 2, 3])
        #expect(
            try sequences(AuditFilter(since: t0.addingTimeInterval(15), until: t0.addingTimeInterval(35))) == [3, 4]
        )
        #expect(try sequences(AuditFilter(account: "alice")) == [2, 3])
        #expect(try sequences(AuditFilter(types: [Self.signedOut], account: "bob")) == [])
        #expect(try sequences(AuditFilter(afterSequence: 3)) == [4, 5])
        #expect(try sequences(AuditFilter(afterSequence: 5)) == [])
        #expect(try sequences(AuditFilter(account: "alice", afterSequence: 2)) == [3])
    }

    @Test func recordingOnAnUnprovisionedDeviceDoesNothing() throws {
        let fixture = try DeviceFixture()
        let before = try fixture.raw().dump()
        #expect(try fixture.device.record(AuditEntry(type: Self.signedIn, actor: "x"), checkpoint: true) == nil)
        #expect(try fixture.device.auditEvents().isEmpty)
        #expect(try fixture.device.lastAuditSequence() == 0)
        #expect(try fixture.raw().dump() == before)
        let verification = try fixture.device.verifyAudit()
        #expect(verification.isIntact)
        #expect(verification.eventCount == 0)
    }

    @Test func aCheckpointIsSignedEveryIntervalEventsAndWhenAskedAndOnlyThen() throws {
        let fixture = try provisioned(checkpointInterval: 5)
        let record = try #require(try fixture.device.record())
        try fixture.recordEvents(11)  // events 2-12
        let raw = try fixture.raw()
        #expect(try raw.checkpoints().map(\.sequence) == [1, 5, 10])  // 1: provisioning always signs

        try fixture.device.record(
            AuditEntry(type: Self.signedOut, actor: KioskApps.scannerID, account: "worker@contoso.com"),
            checkpoint: true
        )
        try fixture.recordEvents(1)  // 14: neither a multiple of 5 nor asked for
        #expect(try raw.checkpoints().map(\.sequence) == [1, 5, 10, 13])

        let chains = Dictionary(uniqueKeysWithValues: try raw.events().map { ($0.sequence, $0.chain) })
        for checkpoint in try raw.checkpoints() {
            #expect(checkpoint.chain == chains[checkpoint.sequence])
            #expect(checkpoint.publicKey == record.auditPublicKey)
            #expect(
                SigningKey.isValidSignature(
                    checkpoint.signature,
                    of: ChainModel.checkpointMessage(sequence: checkpoint.sequence, chain: checkpoint.chain),
                    publicKey: record.auditPublicKey
                )
            )
        }
        let verification = try fixture.device.verifyAudit()
        #expect(verification.isIntact, "\(verification.problems)")
        #expect(verification.eventCount == 14)
        #expect(verification.checkpointCount == 4)
        #expect(verification.headSequence == 14)
    }

    @Test func theShippedIntervalOfAHundredSignsNothingBetweenProvisioningAndTheHundredthEvent() throws {
        let fixture = try provisioned()
        try fixture.recordEvents(98)  // events 2-99
        #expect(try fixture.raw().checkpoints().map(\.sequence) == [1])
        try fixture.recordEvents(1)
        #expect(try fixture.raw().checkpoints().map(\.sequence) == [1, 100])
    }

    @Test func aPolicyUpdateByAnotherProcessChangesTheCheckpointIntervalOfAnOpenDevice() throws {
        let fixture = try provisioned()  // interval 100; this device caches its signer
        let admin = try fixture.secondDevice()
        let outcome = try admin.provision(
            policyDocument: try Policies.edited(by: Policies.setCheckpointInterval(5)),
            actor: DeviceFixture.admin
        )
        #expect(outcome.outcome == .updated)  // event 2, signed
        try fixture.recordEvents(8)  // events 3-10 through the device that provisioned first
        let checkpoints = try fixture.raw().checkpoints().map(\.sequence)
        #expect(checkpoints == [1, 2, 5, 10])
    }

    @Test func theChainAndHeadAreBLAKE2bOverTheDocumentedEncoding() throws {
        let fixture = try provisioned(checkpointInterval: 4)
        try fixture.recordEvents(3)
        try fixture.device.record(
            AuditEntry(
                type: Self.signedOut,
                actor: "com.contoso.kiosk.scanner",
                account: nil,
                reason: nil,
                details: ["ünïcode": "välue", "k": "v"]
            )
        )
        let raw = try fixture.raw()
        let rows = try raw.events()
        #expect(rows.count == 5)
        var previous = ChainModel.genesis
        for row in rows {
            #expect(try row.chain == ChainModel.next(after: previous, row), "event \(row.sequence)")
            previous = row.chain
        }
        let head = try #require(try raw.head())
        #expect(head.sequence == 5)
        #expect(head.chain == previous)
        #expect(try fixture.device.verifyAudit().headChain == previous.hex)
    }

    @Test func anEventAppendedInACallersTransactionCommitsOrRollsBackWithIt() throws {
        let fixture = try provisioned()
        struct Abort: Error {}
        let aborted = caughtError {
            try fixture.store.writeTransaction { tx in
                try tx.add(
                    NewItem(
                        accessGroup: AccessGroup.adalCache,
                        service: "msal",
                        account: "alice",
                        secret: Data("rt".utf8)
                    ),
                    as: KioskApps.scanner
                )
                try fixture.device.append(
                    AuditEntry(type: Self.signedIn, actor: KioskApps.scannerID, account: "alice"),
                    in: tx
                )
                throw Abort()
            }
        }
        #expect(aborted is Abort)
        #expect(try fixture.device.lastAuditSequence() == 1)
        #expect(try fixture.store.metadata(as: KioskApps.scanner).isEmpty)

        let appended = try fixture.store.writeTransaction { tx -> AuditEvent? in
            try tx.add(
                NewItem(accessGroup: AccessGroup.adalCache, service: "msal", account: "alice", secret: Data("rt".utf8)),
                as: KioskApps.scanner
            )
            return try fixture.device.append(
                AuditEntry(type: Self.signedIn, actor: KioskApps.scannerID, account: "alice"),
                in: tx,
                checkpoint: true
            )
        }
        #expect(appended?.sequence == 2)
        #expect(try fixture.store.metadata(as: KioskApps.scanner).count == 1)
        #expect(try fixture.raw().checkpoints().map(\.sequence) == [1, 2])
        #expect(try fixture.device.verifyAudit().isIntact)
    }
}
