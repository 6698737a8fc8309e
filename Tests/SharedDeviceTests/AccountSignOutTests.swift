import Foundation
import KeychainStore
import SharedDevice
import StoreTestSupport
import Testing

/// Sign-out: global on a shared device (every group of every app, one transaction, a wipe tombstone, an
/// audited and checkpointed `account.signed_out`), local to the app on a private one unless it asks to
/// wipe everywhere.
struct AccountSignOutTests {
    /// Ada signed in on the kiosk with credentials in all three groups: the shared MSAL group (two access
    /// tokens), the scanner's own group, and the timeclock's own group (a FOCI client: family refresh token
    /// too). Each app also keeps a non-credential item, and app metadata stays per client.
    private func kioskWithAdaEverywhere() throws -> AccountFixture {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        let timeclock = try fixture.timeclock
        try fixture.signIn(.ada, app: scanner)
        try fixture.signIn(.ada, app: scanner, accessToken: "at-files", scope: "Files.Read")
        try fixture.signIn(.ada, app: scanner, group: KioskApps.scannerGroup, accessToken: "at-scanner-own")
        var foci = Person.ada.response(accessToken: "at-timeclock-own", refreshToken: "rt-family")
        foci.familyID = "1"
        fixture.clock.advance(by: 1)
        try fixture.accounts.signIn(
            foci,
            context: KioskAuthority.context(clientID: "timeclock-client"),
            app: timeclock,
            accessGroup: KioskApps.timeclockGroup
        )
        try fixture.store.add(
            NewItem(
                accessGroup: KioskApps.scannerGroup,
                service: "settings",
                account: "printer",
                secret: Data("lane 3".utf8)
            ),
            as: scanner
        )
        try fixture.store.add(
            NewItem(
                accessGroup: KioskApps.timeclockGroup,
                service: "settings",
                account: "site",
                secret: Data("front desk".utf8)
            ),
            as: timeclock
        )
        try #require(
            try fixture.counts(of: .ada) == [
                AccessGroup.adalCache: 5, KioskApps.scannerGroup: 4, KioskApps.timeclockGroup: 5,
            ]
        )
        return fixture
    }

    @Test(arguments: [KioskApps.scannerID, KioskApps.timeclockID])
    func globalSignOutFromEitherAppEmptiesEveryGroupOfEveryApp(actingAppID: String) throws {
        let fixture = try kioskWithAdaEverywhere()
        let scanner = try fixture.scanner
        let timeclock = try fixture.timeclock
        let acting = try fixture.app(actingAppID)
        let before = try fixture.lastSequence
        let itemsBefore = try fixture.totalAppItems()
        fixture.clock.advance(by: 60)

        let outcome = try fixture.accounts.signOut(app: acting, reason: .user)
        #expect(outcome.account == Person.ada.account)
        #expect(outcome.global)
        #expect(outcome.itemsRemoved == 14)
        #expect(outcome.accessGroups == 3)

        // Counted directly: nothing of Ada in any group; everything else is still there.
        #expect(
            try fixture.counts(of: .ada) == [
                AccessGroup.adalCache: 0, KioskApps.scannerGroup: 0, KioskApps.timeclockGroup: 0,
            ]
        )
        #expect(try fixture.totalAppItems() == itemsBefore - 14)
        #expect(
            try fixture.store.find(ItemQuery(service: "settings", account: "printer"), as: scanner).secret
                == Data("lane 3".utf8)
        )
        #expect(
            try fixture.store.find(ItemQuery(service: "settings", account: "site"), as: timeclock).secret
                == Data("front desk".utf8)
        )

        // Through the token cache, with each app's own identity: no token, no account; app metadata stays.
        let cache = fixture.accounts.tokenCache
        let home = Person.ada.homeAccountID
        let environment = KioskAuthority.environment
        for app in [scanner, timeclock] {
            for client in [KioskAuthority.clientID, "timeclock-client"] {
                #expect(
                    try cache.refreshToken(
                        homeAccountID: home,
                        environment: environment,
                        clientID: client,
                        as: app,
                        in: fixture.store
                    ) == nil
                )
                for scopes in [["User.Read"], ["Files.Read"]] {
                    #expect(
                        try cache.accessToken(
                            homeAccountID: home,
                            environment: environment,
                            clientID: client,
                            realm: KioskAuthority.tenant,
                            scopes: scopes,
                            as: app,
                            in: fixture.store
                        ) == nil
                    )
                }
            }
            #expect(
                try cache.familyRefreshToken(
                    homeAccountID: home,
                    environment: environment,
                    familyID: "1",
                    as: app,
                    in: fixture.store
                ) == nil
            )
            #expect(try cache.account(homeAccountID: home, environment: environment, as: app, in: fixture.store) == nil)
            #expect(try cache.accounts(as: app, in: fixture.store).isEmpty)
            #expect(
                try fixture.accounts.currentAccount(for: app).pair == (nil, Person.ada.account)
                    as (DeviceAccount?, DeviceAccount?)
            )
        }
        let metadata = try fixture.store.readTransaction { tx in
            (
                try cache.appMetadata(clientID: KioskAuthority.clientID, environment: environment, as: scanner, in: tx),
                try cache.appMetadata(clientID: "timeclock-client", environment: environment, as: timeclock, in: tx)
            )
        }
        #expect(metadata.0 != nil)
        #expect(metadata.1?.familyID == "1")

        // Marked signed out, with when and why.
        let status = try #require(try fixture.status(of: .ada))
        #expect(!status.signedIn)
        #expect(status.signedOutAt == fixture.clock.date)
        #expect(status.signOutReason == .user)
        #expect(status.signedInBy != nil)

        // A wipe tombstone: whose credentials, when, why, by whom, how many.
        let tombstones = try fixture.tombstones()
        try #require(tombstones.count == 1)
        #expect(tombstones[0]["homeAccountID"] as? String == home)
        #expect(tombstones[0]["environment"] as? String == environment)
        #expect(tombstones[0]["reason"] as? String == "user")
        #expect(tombstones[0]["actor"] as? String == actingAppID)
        #expect(tombstones[0]["itemsRemoved"] as? Int == 14)
        #expect(tombstones[0]["wipedAt"] as? Double == fixture.clock.date.timeIntervalSince1970)

        // Audited once, by the acting app, with a signed checkpoint at that very event.
        let events = try fixture.events(after: before)
        try #require(events.count == 1, "\(events)")
        let event = events[0]
        #expect(event.type == .accountSignedOut)
        #expect(event.actor == actingAppID)
        #expect(event.account == Person.ada.username)
        #expect(event.reason == "user")
        #expect(event.details["scope"] == "global")
        #expect(event.details["itemsRemoved"] == "14")
        #expect(event.details["accessGroups"] == "3")
        #expect(event.details["homeAccountId"] == home)
        #expect(try fixture.checkpointSequences().contains(event.sequence))
        try fixture.expectAuditIntact()

        // Nobody is signed in now: a token call says so, and another worker may sign in.
        expectSharedDeviceError(.noCurrentAccount) {
            try fixture.accounts.accessToken(for: scanner, clientID: KioskAuthority.clientID, scopes: ["User.Read"])
        }
        try fixture.signIn(.bob, app: timeclock)
        #expect(
            try fixture.accounts.currentAccount(for: scanner).pair == (Person.bob.account, Person.ada.account)
                as (DeviceAccount?, DeviceAccount?)
        )
    }

    @Test func everyReasonIsAuditedAndEverySignOutIsCheckpointed() throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        let timeclock = try fixture.timeclock
        let before = try fixture.lastSequence
        // (reason, acting app, explicit actor) — the administrator acts without an app.
        let cases: [(SignOutReason, AppIdentity?, String?)] = [
            (.user, scanner, nil), (.shiftEnd, timeclock, nil), (.idle, scanner, nil),
            (.admin, nil, DeviceFixture.admin), (.admin, nil, nil),
        ]
        for (reason, app, actor) in cases {
            try fixture.signIn(.ada, app: scanner)
            try fixture.signIn(.ada, app: timeclock, group: KioskApps.timeclockGroup)
            let outcome = try fixture.accounts.signOut(app: app, reason: reason, actor: actor)
            #expect(outcome.global)
            #expect(outcome.itemsRemoved == 8)
            #expect(try fixture.counts(of: .ada).values.allSatisfy { $0 == 0 }, "\(reason)")
            #expect(try fixture.status(of: .ada)?.signOutReason == reason)
        }

        let events = try fixture.accountEvents(after: before)
        let signOuts = events.filter { $0.type == .accountSignedOut }
        #expect(signOuts.map(\.reason) == ["user", "shift-end", "idle", "admin", "admin"])
        #expect(
            signOuts.map(\.actor) == [
                KioskApps.scannerID, KioskApps.timeclockID, KioskApps.scannerID, DeviceFixture.admin, "devicectl",
            ]
        )
        #expect(signOuts.allSatisfy { $0.details["scope"] == "global" && $0.account == Person.ada.username })
        #expect(Set(signOuts.map(\.correlationID)).count == signOuts.count, "each sign-out is its own operation")
        // The policy checkpoints every 100 events; sign-outs are checkpointed regardless, sign-ins are not.
        let checkpoints = try fixture.checkpointSequences()
        for signOut in signOuts {
            #expect(checkpoints.contains(signOut.sequence), "no checkpoint at sign-out \(signOut.sequence)")
        }
        for signIn in events where signIn.type == .accountSignedIn { #expect(!checkpoints.contains(signIn.sequence)) }
        #expect(events.filter { $0.type == .accountSignedIn }.count == cases.count)
        #expect(try fixture.tombstones().count == 1, "one tombstone per account, the latest wipe's")
        #expect(try fixture.tombstones().first?["actor"] as? String == "devicectl")
        try fixture.expectAuditIntact()
    }

    @Test func signingOutWithNobodySignedInFailsAndRecordsNothing() throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        let before = try fixture.lastSequence
        expectSharedDeviceError(.noCurrentAccount) { try fixture.accounts.signOut(app: scanner, reason: .user) }
        expectSharedDeviceError(.noCurrentAccount) {
            try fixture.accounts.signOut(app: nil, reason: .admin, actor: DeviceFixture.admin)
        }
        #expect(try fixture.lastSequence == before)

        try fixture.signIn(.ada, app: scanner)
        try fixture.accounts.signOut(app: scanner, reason: .user)
        let afterFirst = try fixture.lastSequence
        expectSharedDeviceError(.noCurrentAccount) {
            try fixture.accounts.signOut(app: try fixture.timeclock, reason: .user)
        }
        #expect(try fixture.lastSequence == afterFirst)
        #expect(try fixture.tombstones().count == 1)
    }

    // MARK: - Private mode

    @Test func privateModeSignOutIsLocalToTheCallingApp() throws {
        let fixture = try AccountFixture(policy: try PersonalApps.policy())
        let notes = try fixture.app(PersonalApps.notesID)
        let camera = try fixture.app(PersonalApps.cameraID)
        try fixture.signIn(.ada, app: notes, group: PersonalApps.notesGroup)
        try fixture.signIn(.ada, app: camera, group: PersonalApps.cameraGroup)
        let before = try fixture.lastSequence

        let outcome = try fixture.accounts.signOut(app: notes, reason: .user)
        #expect(outcome.account == Person.ada.account)
        #expect(!outcome.global)
        #expect(outcome.itemsRemoved == 4)
        #expect(outcome.accessGroups == 2)  // the notes app's own groups only

        #expect(
            try fixture.counts(of: .ada) == [
                AccessGroup.universalStorage: 0, PersonalApps.notesGroup: 0, PersonalApps.cameraGroup: 4,
            ]
        )
        #expect(
            try fixture.accounts.currentAccount(for: notes).pair == (nil, Person.ada.account)
                as (DeviceAccount?, DeviceAccount?)
        )
        #expect(
            try fixture.accounts.currentAccount(for: camera).pair == (Person.ada.account, Person.ada.account)
                as (DeviceAccount?, DeviceAccount?)
        )
        #expect(
            try fixture.accounts.accessToken(for: camera, clientID: KioskAuthority.clientID, scopes: ["User.Read"])?
                .secret == "at-5f7c1d2e"
        )
        expectSharedDeviceError(.noCurrentAccount) {
            try fixture.accounts.accessToken(for: notes, clientID: KioskAuthority.clientID, scopes: ["User.Read"])
        }
        // Ada is still signed in on the device (in the camera app); no wipe, so no tombstone.
        #expect(try fixture.status(of: .ada)?.signedIn == true)
        #expect(try fixture.tombstones().isEmpty)
        let events = try fixture.events(after: before)
        try #require(events.count == 1)
        #expect(events[0].type == .accountSignedOut)
        #expect(events[0].actor == PersonalApps.notesID)
        #expect(events[0].reason == "user")
        #expect(events[0].details["scope"] == "local")
        #expect(events[0].details["accessGroups"] == "2")
        #expect(try fixture.checkpointSequences().contains(events[0].sequence))

        // The notes app has nothing left to sign out.
        let afterLocal = try fixture.lastSequence
        expectSharedDeviceError(.noCurrentAccount) { try fixture.accounts.signOut(app: notes, reason: .user) }
        #expect(try fixture.lastSequence == afterLocal)

        // The camera app's own local sign-out is the last place Ada was: now she is signed out.
        fixture.clock.advance(by: 5)
        let last = try fixture.accounts.signOut(app: camera, reason: .idle)
        #expect(!last.global)
        #expect(try fixture.counts(of: .ada).values.allSatisfy { $0 == 0 })
        let status = try #require(try fixture.status(of: .ada))
        #expect(!status.signedIn)
        #expect(status.signOutReason == .idle)
        #expect(status.signedOutAt == fixture.clock.date)
        #expect(try fixture.tombstones().isEmpty)
        try fixture.expectAuditIntact()
    }

    @Test func privateModeWipeEverywhereRemovesTheAccountFromEveryApp() throws {
        let fixture = try AccountFixture(policy: try PersonalApps.policy())
        let notes = try fixture.app(PersonalApps.notesID)
        let camera = try fixture.app(PersonalApps.cameraID)
        try fixture.signIn(.ada, app: notes, group: PersonalApps.notesGroup)
        try fixture.signIn(.ada, app: camera)  // the default group: the shared universalstorage
        try fixture.signIn(.ada, app: camera, group: PersonalApps.cameraGroup)
        try #require(
            try fixture.counts(of: .ada) == [
                AccessGroup.universalStorage: 4, PersonalApps.notesGroup: 4, PersonalApps.cameraGroup: 4,
            ]
        )
        let before = try fixture.lastSequence

        let outcome = try fixture.accounts.signOut(app: notes, reason: .admin, wipeEverywhere: true)
        #expect(outcome.global)
        #expect(outcome.itemsRemoved == 12)
        #expect(outcome.accessGroups == 3)
        #expect(try fixture.counts(of: .ada).values.allSatisfy { $0 == 0 })
        #expect(
            try fixture.accounts.currentAccount(for: camera).pair == (nil, Person.ada.account)
                as (DeviceAccount?, DeviceAccount?)
        )
        #expect(try fixture.status(of: .ada)?.signedIn == false)
        #expect(try fixture.tombstones().first?["actor"] as? String == PersonalApps.notesID)
        let events = try fixture.events(after: before)
        #expect(events.map(\.type) == [.accountSignedOut])
        #expect(events.first?.details["scope"] == "global")
        #expect(try fixture.checkpointSequences().contains(try #require(events.first).sequence))
        try fixture.expectAuditIntact()
    }

    @Test func privateModeAllowsADifferentAccountPerAppAndSignOutTouchesOnlyOne() throws {
        let fixture = try AccountFixture(policy: try PersonalApps.policy())
        let notes = try fixture.app(PersonalApps.notesID)
        let camera = try fixture.app(PersonalApps.cameraID)
        try fixture.signIn(.ada, app: notes, group: PersonalApps.notesGroup)
        // no "already signed in" on a private device
        try fixture.signIn(.bob, app: camera, group: PersonalApps.cameraGroup)

        #expect(try fixture.accounts.currentAccount(for: notes).current == Person.ada.account)
        #expect(try fixture.accounts.currentAccount(for: camera).current == Person.bob.account)
        #expect(
            try fixture.accounts.accounts().filter(\.signedIn).map(\.account) == [
                Person.ada.account, Person.bob.account,
            ]
        )
        let signIns = try fixture.accountEvents().filter { $0.type == .accountSignedIn }
        #expect(signIns.map(\.account) == [Person.ada.username, Person.bob.username])
        #expect(signIns.allSatisfy { $0.details["mode"] == "private" })

        try fixture.accounts.signOut(app: camera, reason: .user)
        #expect(try fixture.counts(of: .bob).values.allSatisfy { $0 == 0 })
        #expect(try fixture.count(of: .ada, in: PersonalApps.notesGroup) == 4)
        #expect(try fixture.accounts.currentAccount(for: notes).current == Person.ada.account)
        #expect(try fixture.accounts.accounts().filter(\.signedIn).map(\.account) == [Person.ada.account])
    }

    @Test func privateModeAdministratorSignOutRemovesTheLatestAccountEverywhereOneAtATime() throws {
        let fixture = try AccountFixture(policy: try PersonalApps.policy())
        let notes = try fixture.app(PersonalApps.notesID)
        let camera = try fixture.app(PersonalApps.cameraID)
        try fixture.signIn(.ada, app: notes, group: PersonalApps.notesGroup)
        fixture.clock.advance(by: 60)
        try fixture.signIn(.bob, app: camera, group: PersonalApps.cameraGroup)

        let first = try fixture.accounts.signOut(app: nil, reason: .admin)
        #expect(first.account == Person.bob.account)
        #expect(first.global)
        #expect(try fixture.counts(of: .bob).values.allSatisfy { $0 == 0 })
        #expect(try fixture.count(of: .ada, in: PersonalApps.notesGroup) == 4)

        let second = try fixture.accounts.signOut(app: nil, reason: .admin)
        #expect(second.account == Person.ada.account)
        #expect(try fixture.counts(of: .ada).values.allSatisfy { $0 == 0 })
        #expect(try fixture.accounts.accounts().allSatisfy { !$0.signedIn })
        expectSharedDeviceError(.noCurrentAccount) { try fixture.accounts.signOut(app: nil, reason: .admin) }
        let signOuts = try fixture.accountEvents().filter { $0.type == .accountSignedOut }
        #expect(signOuts.map(\.account) == [Person.bob.username, Person.ada.username])
        #expect(signOuts.allSatisfy { $0.details["scope"] == "global" && $0.reason == "admin" })
        try fixture.expectAuditIntact()
    }

    @Test func privateModeSignOutWithoutAnAccountFails() throws {
        let fixture = try AccountFixture(policy: try PersonalApps.policy())
        let notes = try fixture.app(PersonalApps.notesID)
        expectSharedDeviceError(.noCurrentAccount) { try fixture.accounts.signOut(app: notes, reason: .user) }
        expectSharedDeviceError(.noCurrentAccount) {
            try fixture.accounts.signOut(app: notes, reason: .user, wipeEverywhere: true)
        }
        #expect(try fixture.accountEvents().isEmpty)
    }
}
