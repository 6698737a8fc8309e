import Foundation
import KeychainStore
import SharedDevice
import StoreTestSupport
import Testing

/// Provisioning, policy updates, forced mode changes, entitlements and deprovisioning of a device.
struct ProvisioningTests {
    /// A kiosk device with one item in each app group: the shared MSAL group, the scanner's and the timeclock's.
    private func provisionedKioskWithItems() throws -> DeviceFixture {
        let fixture = try DeviceFixture()
        try fixture.provision(try Policies.kiosk())
        try fixture.store.add(
            NewItem(
                accessGroup: AccessGroup.adalCache,
                service: "msal",
                account: "rt-scanner",
                secret: Data("shared-from-scanner".utf8)
            ),
            as: KioskApps.scanner
        )
        try fixture.store.add(
            NewItem(
                accessGroup: AccessGroup.adalCache,
                service: "msal",
                account: "rt-timeclock",
                secret: Data("shared-from-timeclock".utf8)
            ),
            as: KioskApps.timeclock
        )
        try fixture.store.add(
            NewItem(
                accessGroup: KioskApps.scannerGroup,
                service: "private",
                account: "a",
                secret: Data("scanner-private".utf8)
            ),
            as: KioskApps.scanner
        )
        try fixture.store.add(
            NewItem(
                accessGroup: KioskApps.timeclockGroup,
                service: "private",
                account: "a",
                secret: Data("timeclock-private".utf8)
            ),
            as: KioskApps.timeclock
        )
        return fixture
    }

    @Test func firstProvisioningRecordsThePolicyItsSHA256ANewDeviceIDAndAnAuditKey() throws {
        let fixture = try DeviceFixture()
        let document = try Policies.kiosk()
        let (outcome, record) = try fixture.provision(document)

        #expect(outcome == .provisioned)
        #expect(record.policyDocument == document)
        #expect(record.policySHA256 == (try sha256sum(document)))
        #expect(record.mode == .shared)
        #expect(record.name == "Front desk kiosk 3")
        #expect(record.policyID == "contoso-frontdesk-kiosk-2026-11")
        #expect(record.provisionedAt == FakeClock.start)
        #expect(record.policyAppliedAt == FakeClock.start)
        #expect(UUID(uuidString: record.deviceID) != nil)
        #expect(record.deviceID == record.deviceID.lowercased())
        #expect(record.auditPublicKey.count == SigningKey.publicKeyByteCount)
        // Stored: another store object on the same directory reads the same record and policy.
        let other = try fixture.secondDevice()
        #expect(try other.record() == record)
        #expect(try other.policy()?.apps.map(\.id) == [KioskApps.scannerID, KioskApps.timeclockID])

        // The first event says so, and its checkpoint is signed by the recorded audit key.
        let events = try fixture.device.auditEvents()
        #expect(events.map(\.type) == [.deviceProvisioned])
        #expect(events.first?.details["deviceId"] == record.deviceID)
        #expect(events.first?.details["policySha256"] == record.policySHA256)
        #expect(events.first?.details["mode"] == "shared")
        #expect(events.first?.details["auditPublicKey"] == record.auditPublicKey.hex)
        let checkpoint = try #require(try fixture.raw().checkpoints().first)
        #expect(checkpoint.sequence == 1)
        #expect(checkpoint.publicKey == record.auditPublicKey)
        #expect(
            SigningKey.isValidSignature(
                checkpoint.signature,
                of: ChainModel.checkpointMessage(sequence: 1, chain: checkpoint.chain),
                publicKey: record.auditPublicKey
            )
        )
        #expect(try fixture.device.verifyAudit().isIntact)
    }

    @Test func twoDevicesGetDifferentIDsAndAuditKeys() throws {
        let first = try DeviceFixture()
        let second = try DeviceFixture()
        let a = try first.provision(try Policies.kiosk()).record
        let b = try second.provision(try Policies.kiosk()).record
        #expect(a.deviceID != b.deviceID)
        #expect(a.auditPublicKey != b.auditPublicKey)
        #expect(a.policySHA256 == b.policySHA256)
    }

    @Test func theSamePolicyAgainIsUnchangedAndWritesNothing() throws {
        let fixture = try provisionedKioskWithItems()
        let record = try #require(try fixture.device.record())
        let raw = try fixture.raw()
        let before = try raw.dump()
        let eventsBefore = try fixture.device.lastAuditSequence()
        fixture.clock.advance(by: 3600)

        let (outcome, again) = try fixture.provision(try Policies.kiosk())
        #expect(outcome == .unchanged)
        #expect(again == record)
        // Also through another process's device, which has nothing cached.
        #expect(
            try fixture.secondDevice().provision(policyDocument: try Policies.kiosk(), actor: DeviceFixture.admin)
                .outcome == .unchanged
        )
        // Even with force.
        #expect(try fixture.provision(try Policies.kiosk(), force: true).outcome == .unchanged)

        #expect(try raw.dump() == before)
        #expect(try fixture.device.lastAuditSequence() == eventsBefore)
        #expect(try fixture.device.record()?.policyAppliedAt == FakeClock.start)
    }

    @Test func aChangedPolicyWithTheSameModeUpdatesTheRecordAndShredsGroupsNoAppIsEntitledToAnymore() throws {
        let fixture = try provisionedKioskWithItems()
        let before = try #require(try fixture.device.record())
        #expect(try fixture.accessGroupNames().count == 5)
        fixture.clock.advance(by: 600)
        let updated = try Policies.edited(
            by: Policies.all(Policies.removeApp(KioskApps.timeclockID), Policies.setName("Front desk kiosk 4"))
        )

        let (outcome, record) = try fixture.provision(updated)
        #expect(outcome == .updated)
        #expect(record.deviceID == before.deviceID)
        #expect(record.auditPublicKey == before.auditPublicKey)
        #expect(record.provisionedAt == before.provisionedAt)
        #expect(record.policyAppliedAt == FakeClock.start.addingTimeInterval(600))
        #expect(record.name == "Front desk kiosk 4")
        #expect(record.policySHA256 == (try sha256sum(updated)))
        #expect(record.policyDocument == updated)
        #expect(try fixture.device.record() == record)

        // The timeclock's private group is gone, key and items; the groups the scanner keeps are intact.
        expectKeychainError(.itemNotFound) {
            try fixture.store.find(
                ItemQuery(accessGroup: KioskApps.timeclockGroup, service: "private"),
                as: KioskApps.timeclock
            )
        }
        #expect(
            try fixture.store.find(
                ItemQuery(accessGroup: KioskApps.scannerGroup, service: "private"),
                as: KioskApps.scanner
            ).secret
                == Data("scanner-private".utf8)
        )
        let shared = try fixture.store.findAll(
            ItemQuery(accessGroup: AccessGroup.adalCache, service: "msal"),
            as: KioskApps.scanner
        )
        #expect(Set(shared.map(\.secret)) == [Data("shared-from-scanner".utf8), Data("shared-from-timeclock".utf8)])
        #expect(
            try fixture.accessGroupNames()
                == [AccessGroup.adalCache, KioskApps.scannerGroup, AccessGroup.auditAnchor, AccessGroup.device].sorted()
        )
        #expect(try fixture.raw().count("access_groups") == 4)

        let event = try #require(try fixture.device.auditEvents().last)
        #expect(event.type == .policyUpdated)
        #expect(event.details["previousPolicySha256"] == before.policySHA256)
        #expect(event.details["policySha256"] == record.policySHA256)
        #expect(event.details["groupsRemoved"] == "1")
        #expect(event.details["itemsRemoved"] == "1")
        #expect(event.time == FakeClock.start.addingTimeInterval(600))
        // The app is no longer on the device.
        expectSharedDeviceError(.appNotInPolicy) {
            try fixture.device.appIdentity(KioskApps.timeclockID, actor: KioskApps.timeclockID)
        }
        #expect(try fixture.device.verifyAudit().isIntact)
    }

    @Test(arguments: ["personal.json", "kiosk-as-private"])
    func aModeChangeWithoutForceIsRefusedAndChangesNothing(policy: String) throws {
        let fixture = try provisionedKioskWithItems()
        let document =
            policy == "personal.json" ? try Policies.personal() : try Policies.edited(by: Policies.setMode("private"))
        let record = try fixture.device.record()
        let raw = try fixture.raw()
        let before = try raw.dump()
        fixture.clock.advance(by: 60)

        let error = expectSharedDeviceError(.modeChangeRequiresForce) { try fixture.provision(document) }
        #expect(error?.message.contains("--force") == true)
        #expect(try raw.dump() == before)
        #expect(try fixture.device.record() == record)
        #expect(try fixture.device.lastAuditSequence() == 1)
        #expect(
            try fixture.store.find(ItemQuery(accessGroup: KioskApps.timeclockGroup), as: KioskApps.timeclock).secret
                == Data("timeclock-private".utf8)
        )
    }

    @Test func aForcedModeChangeShredsEveryAppGroupEvenTheOnesTheNewPolicyListsAndKeepsTheDeviceID() throws {
        let fixture = try provisionedKioskWithItems()
        let before = try #require(try fixture.device.record())
        fixture.clock.advance(by: 60)
        // The same apps with a new mode: their groups are still wiped.
        let document = try Policies.edited(by: Policies.setMode("private"))

        let (outcome, record) = try fixture.provision(document, force: true)
        #expect(outcome == .modeChanged)
        #expect(record.mode == .private)
        #expect(record.deviceID == before.deviceID)
        #expect(record.auditPublicKey == before.auditPublicKey)
        #expect(record.policySHA256 == (try sha256sum(document)))

        for app in [KioskApps.scanner, KioskApps.timeclock] {
            #expect(try fixture.device.appIdentity(app.appID, actor: app.appID) == app)
            #expect(try fixture.store.metadata(matching: .all, as: app).isEmpty)
            expectKeychainError(.itemNotFound) { try fixture.store.find(.all, as: app) }
        }
        #expect(try fixture.accessGroupNames() == [AccessGroup.auditAnchor, AccessGroup.device])
        #expect(try fixture.accessGroupNames().allSatisfy(AccessGroup.isReserved))
        let raw = try fixture.raw()
        #expect(try raw.count("access_groups") == 2)
        #expect(try raw.count("items") == 3)  // device record, audit signing key, audit anchor

        let event = try #require(try fixture.device.auditEvents().last)
        #expect(event.type == .deviceModeChanged)
        #expect(event.details["from"] == "shared")
        #expect(event.details["to"] == "private")
        #expect(event.details["groupsRemoved"] == "3")
        #expect(event.details["itemsRemoved"] == "4")
        #expect(try raw.checkpoints().last?.sequence == event.sequence)
        #expect(try fixture.device.verifyAudit().isIntact)
    }

    @Test func aForcedChangeToThePersonalPolicyGivesItsAppsAnEmptyKeychain() throws {
        let fixture = try provisionedKioskWithItems()
        let (outcome, record) = try fixture.provision(try Policies.personal(), force: true)
        #expect(outcome == .modeChanged)
        #expect(record.name == "Dana's field laptop")
        let fieldnotes = try #require(
            try fixture.device.appIdentity("com.contoso.fieldnotes", actor: "com.contoso.fieldnotes")
        )
        #expect(fieldnotes.accessGroups == [AccessGroup.universalStorage, "com.contoso.fieldnotes"])
        #expect(try fixture.store.metadata(as: fieldnotes).isEmpty)
        #expect(try fixture.store.metadata(as: KioskApps.scanner).isEmpty)
        expectSharedDeviceError(.appNotInPolicy) {
            try fixture.device.appIdentity(KioskApps.scannerID, actor: KioskApps.scannerID)
        }
    }

    @Test func appIdentityGivesListedAppsThePolicyEntitlementsAndAuditsUnlistedOnes() throws {
        let fixture = try DeviceFixture()
        // not provisioned
        #expect(try fixture.device.appIdentity(KioskApps.scannerID, actor: KioskApps.scannerID) == nil)
        try fixture.provision(try Policies.kiosk())

        let scanner = try #require(try fixture.device.appIdentity(KioskApps.scannerID, actor: KioskApps.scannerID))
        #expect(scanner.appID == KioskApps.scannerID)
        #expect(scanner.accessGroups == [KioskApps.scannerGroup, AccessGroup.adalCache])
        #expect(try fixture.device.lastAuditSequence() == 1)

        fixture.clock.advance(by: 5)
        let error = expectSharedDeviceError(.appNotInPolicy) {
            try fixture.device.appIdentity("com.fabrikam.intruder", actor: "uid 1003")
        }
        #expect(error?.message.contains("com.fabrikam.intruder") == true)
        let denied = try fixture.device.auditEvents(matching: AuditFilter(types: [.keychainAccessDenied]))
        #expect(denied.count == 1)
        #expect(denied.first?.sequence == 2)
        #expect(denied.first?.actor == "uid 1003")
        #expect(denied.first?.details["app"] == "com.fabrikam.intruder")
        #expect(denied.first?.time == FakeClock.start.addingTimeInterval(5))
        #expect(try fixture.device.verifyAudit().isIntact)
    }

    @Test func noAppCanBeEntitledToTheDeviceGroups() throws {
        for group in [AccessGroup.device, AccessGroup.auditAnchor, "devicectl.other"] {
            expectKeychainError(.missingEntitlement) {
                try AppIdentity(appID: "com.contoso.kiosk.scanner", accessGroups: [AccessGroup.adalCache, group])
            }
        }
        let fixture = try DeviceFixture()
        try fixture.provision(try Policies.kiosk())
        // A listed app cannot reach the device's record or signing key by naming the group.
        expectKeychainError(.missingEntitlement) {
            try fixture.store.findAll(ItemQuery(accessGroup: AccessGroup.device), as: KioskApps.scanner)
        }
        #expect(try fixture.store.metadata(as: KioskApps.scanner).isEmpty)
        // A policy that tries to entitle an app to it does not apply.
        let greedy = try Policies.edited { document in
            var apps = document["apps"] as! [[String: Any]]
            apps[0]["accessGroups"] = [AccessGroup.adalCache, AccessGroup.device]
            document["apps"] = apps
        }
        let error = expectSharedDeviceError(.invalidPolicy) { try fixture.provision(greedy) }
        #expect(error?.policyError?.path == "apps[0].accessGroups[1]")
        #expect(try fixture.device.lastAuditSequence() == 1)
    }

    @Test func anInvalidPolicyIsRefusedWithItsPathAndCreatesNothing() throws {
        let fixture = try DeviceFixture()
        let before = try fixture.raw().dump()
        let error = expectSharedDeviceError(.invalidPolicy) {
            try fixture.provision(try Policies.edited(by: Policies.setMode("kiosk")))
        }
        #expect(error?.policyError?.path == "device.mode")
        #expect(try fixture.device.record() == nil)
        #expect(try fixture.raw().dump() == before)
    }

    @Test func deprovisioningRemovesEverythingButTheAuditAnchorAndTheLogStillVerifies() throws {
        let fixture = try provisionedKioskWithItems()
        let record = try #require(try fixture.device.record())
        fixture.clock.advance(by: 120)

        let outcome = try fixture.device.deprovision(actor: DeviceFixture.admin, reason: "returned to IT")
        #expect(outcome.wasProvisioned)
        #expect(outcome.groupsRemoved == 4)  // device, MSAL shared, scanner, timeclock
        #expect(outcome.itemsRemoved == 6)  // 4 app items, device record, signing key

        #expect(try fixture.device.record() == nil)
        #expect(try fixture.device.policy() == nil)
        #expect(try fixture.device.appIdentity(KioskApps.scannerID, actor: KioskApps.scannerID) == nil)
        #expect(try fixture.accessGroupNames() == [AccessGroup.auditAnchor])
        let raw = try fixture.raw()
        #expect(try raw.count("access_groups") == 1)
        #expect(try raw.count("items") == 1)
        for app in [KioskApps.scanner, KioskApps.timeclock] {
            #expect(try fixture.store.metadata(as: app).isEmpty)
        }
        expectKeychainError(.itemNotFound) {
            try fixture.store.findAll(ItemQuery(accessGroup: AccessGroup.device), as: .deviceAdministrator)
        }

        let verification = try fixture.device.verifyAudit()
        #expect(verification.isIntact, "\(verification.problems)")
        #expect(verification.eventCount == 2)
        let last = try #require(try fixture.device.auditEvents().last)
        #expect(last.type == .deviceDeprovisioned)
        #expect(last.reason == "returned to IT")
        #expect(last.details["deviceId"] == record.deviceID)
        #expect(last.time == FakeClock.start.addingTimeInterval(120))
        #expect(try raw.checkpoints().last?.sequence == last.sequence)

        // Deprovisioning again does nothing.
        let dump = try raw.dump()
        #expect(try fixture.device.deprovision(actor: DeviceFixture.admin).wasProvisioned == false)
        #expect(try raw.dump() == dump)
        // Nothing is recorded on a device that is not provisioned.
        #expect(try fixture.device.record(AuditEntry(type: AuditEventType("account.signed_in"), actor: "x")) == nil)
        #expect(try fixture.device.lastAuditSequence() == 2)
    }

    @Test func provisioningAgainAfterDeprovisioningGivesANewDeviceIDAndKeyAndTheWholeLogVerifies() throws {
        let fixture = try provisionedKioskWithItems()
        let first = try #require(try fixture.device.record())
        try fixture.recordEvents(3)
        _ = try fixture.device.deprovision(actor: DeviceFixture.admin)
        fixture.clock.advance(by: 86_400)

        let (outcome, second) = try fixture.provision(try Policies.kiosk())
        #expect(outcome == .provisioned)
        #expect(second.deviceID != first.deviceID)
        #expect(second.auditPublicKey != first.auditPublicKey)
        #expect(second.provisionedAt == fixture.clock.date)
        #expect(try fixture.store.metadata(as: KioskApps.scanner).isEmpty)  // the old workers' items did not come back
        try fixture.recordEvents(2)

        let events = try fixture.device.auditEvents()
        #expect(events.map(\.sequence) == Array(1...8))
        #expect(events.filter { $0.type == .deviceProvisioned }.map(\.sequence) == [1, 6])
        #expect(events[5].details["deviceId"] == second.deviceID)
        let keys = Set(try fixture.raw().checkpoints().map(\.publicKey))
        #expect(keys == [first.auditPublicKey, second.auditPublicKey])
        let verification = try fixture.device.verifyAudit()
        #expect(verification.isIntact, "\(verification.problems)")
        #expect(verification.eventCount == 8)
        #expect(verification.checkpointCount == 3)  // provisioned, deprovisioned, provisioned again
        // Through a fresh store object too (nothing cached).
        #expect(try fixture.secondDevice().verifyAudit().isIntact)
    }

    @Test func aDeviceWhoseRecordNoLongerDecodesCanBeReprovisionedWithForceAsTheErrorAdvises() throws {
        let fixture = try provisionedKioskWithItems()
        let item = try fixture.deviceRecordItem()
        try fixture.store.update(
            ItemQuery(accessGroup: AccessGroup.device, service: item.service, account: item.account),
            with: ItemChanges(secret: Data("{}".utf8)),
            as: .deviceAdministrator
        )
        let damaged = expectSharedDeviceError(.deviceRecordDamaged) { try fixture.device.record() }
        #expect(damaged?.message.contains("--force") == true)

        // Following the advice must work.
        let error = caughtError { try fixture.provision(try Policies.kiosk(), force: true) }
        #expect(error == nil, "\(error.map { "\($0)" } ?? "")")
        #expect(try fixture.device.record()?.policySHA256 == (try sha256sum(try Policies.kiosk())))
        #expect(try fixture.device.verifyAudit().isIntact)
    }

    @Test func aDeviceWhoseAuditSigningKeyIsMissingCanBeReprovisionedWithForceAsTheErrorAdvises() throws {
        let fixture = try provisionedKioskWithItems()
        let key = try fixture.signingKeyItem()
        try fixture.store.delete(
            ItemQuery(accessGroup: AccessGroup.device, service: key.service, account: key.account),
            as: .deviceAdministrator
        )
        // A process that did not provision (nothing cached) cannot sign any more, and is told what to do.
        let missing = expectSharedDeviceError(.deviceRecordDamaged) {
            try fixture.secondDevice().record(
                AuditEntry(type: AuditEventType("account.signed_in"), actor: KioskApps.scannerID)
            )
        }
        #expect(missing?.message.contains("--force") == true)

        // Following the advice must work.
        let error = caughtError {
            try fixture.secondDevice().provision(
                policyDocument: try Policies.personal(),
                force: true,
                actor: DeviceFixture.admin
            )
        }
        #expect(error == nil, "\(error.map { "\($0)" } ?? "")")
        #expect(try fixture.device.record()?.mode == .private)
        #expect(try fixture.device.verifyAudit().isIntact)
    }

    @Test func theDatabaseFilesHoldNoPolicyItemSecretOrSigningKeyInClear() throws {
        let fixture = try provisionedKioskWithItems()
        try fixture.recordEvents(3)
        let record = try #require(try fixture.device.record())
        // The Ed25519 secret key is 64 bytes: a 32-byte seed, then the public key (which is public).
        let signingKey = try fixture.signingKeyItem()
        #expect(try SigningKey(storedBytes: signingKey.secret).publicKey == record.auditPublicKey)
        let seed = Data(signingKey.secret.prefix(32))

        let files = fixture.directory.databaseFiles()
        #expect(files["-wal"].map { !$0.isEmpty } == true)  // recent writes are in the WAL, which is scanned too
        // Control: the audit log's details (not secret) are in clear, so the scan does see the data.
        #expect(files.values.contains { $0.range(of: Data(record.deviceID.utf8)) != nil })
        let needles: [(String, Data)] = [
            ("kiosk clientId", Data("kiosk-apps".utf8)),
            ("device name", Data("Front desk kiosk 3".utf8)),
            ("issuer", Data("127.0.0.1:4593".utf8)),
            ("policy document", Data(#""clientId""#.utf8)),
            ("timeclock group name", Data(KioskApps.timeclockGroup.utf8)),
            ("item secret", Data("scanner-private".utf8)),
            ("shared item secret", Data("shared-from-timeclock".utf8)),
            ("signing key seed", seed),
        ]
        for (name, bytes) in files {
            for (what, needle) in needles {
                #expect(bytes.range(of: needle) == nil, "\(what) found in clear in \(name)")
            }
        }
    }
}
