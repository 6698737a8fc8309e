import Foundation
import KeychainStore
import SharedDevice
import StoreTestSupport
import Testing

/// The shift switch: the current worker's shift ends (global sign-out) and the next worker signs in, as
/// one audited step; a failed sign-in leaves the sign-out in place and is reported. Plus the account
/// change stream in one process.
struct AccountSwitchTests {
    @Test func aSwitchEndsTheShiftAndSignsTheNextWorkerInUnderOneCorrelationID() throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        let timeclock = try fixture.timeclock
        try fixture.signIn(.ada, app: scanner)
        try fixture.signIn(.ada, app: scanner, group: KioskApps.scannerGroup)
        try fixture.signIn(.ada, app: timeclock, group: KioskApps.timeclockGroup)
        _ = try fixture.accounts.currentAccount(for: timeclock)
        let before = try fixture.lastSequence
        fixture.clock.advance(by: 3600)

        let outcome = try fixture.accounts.switchAccount(
            to: Person.bob.response(),
            context: KioskAuthority.context(),
            app: timeclock
        )
        #expect(outcome.signInError == nil)
        #expect(outcome.signedIn == Person.bob.account)
        let signedOut = try #require(outcome.signedOut)
        #expect(signedOut.account == Person.ada.account)
        #expect(signedOut.global)
        #expect(signedOut.itemsRemoved == 12)
        #expect(signedOut.accessGroups == 3)
        #expect(UUID(uuidString: outcome.correlationID) != nil)

        // Ada is gone from every group; Bob's sign-in is in the timeclock's token group (MSAL's shared one).
        #expect(try fixture.counts(of: .ada).values.allSatisfy { $0 == 0 })
        #expect(
            try fixture.counts(of: .bob) == [
                AccessGroup.adalCache: 4, KioskApps.scannerGroup: 0, KioskApps.timeclockGroup: 0,
            ]
        )
        // The timeclock signed Bob in, so Bob is already its principal; the scanner last saw Ada.
        #expect(
            try fixture.accounts.currentAccount(for: timeclock).pair == (Person.bob.account, Person.bob.account)
                as (DeviceAccount?, DeviceAccount?)
        )
        #expect(
            try fixture.accounts.currentAccount(for: scanner).pair == (Person.bob.account, Person.ada.account)
                as (DeviceAccount?, DeviceAccount?)
        )
        #expect(
            try fixture.accounts.accessToken(
                for: scanner,
                clientID: KioskAuthority.clientID,
                scopes: ["User.Read"],
                account: Person.bob.account
            )?.secret == "at-8b1e2f3a"
        )
        expectSharedDeviceError(.currentAccountMismatch) {
            try fixture.accounts.accessToken(
                for: scanner,
                clientID: KioskAuthority.clientID,
                scopes: ["User.Read"],
                account: Person.ada.account
            )
        }

        let ada = try #require(try fixture.status(of: .ada))
        let bob = try #require(try fixture.status(of: .bob))
        #expect(!ada.signedIn)
        #expect(ada.signOutReason == .shiftEnd)
        #expect(ada.signedOutAt == fixture.clock.date)
        #expect(bob.signedIn)
        #expect(bob.signedInBy == KioskApps.timeclockID)
        #expect(bob.signedInAt == fixture.clock.date)

        // Audit: sign-out, sign-in, switch — in that order, one correlation id, a checkpoint at the sign-out.
        let events = try fixture.events(after: before)
        #expect(events.map(\.type) == [.accountSignedOut, .accountSignedIn, .accountSwitched])
        #expect(events.allSatisfy { $0.correlationID == outcome.correlationID }, "\(events.map(\.correlationID))")
        #expect(events.allSatisfy { $0.actor == KioskApps.timeclockID })
        #expect(events.map(\.account) == [Person.ada.username, Person.bob.username, Person.bob.username])
        #expect(events[0].reason == "shift-end")
        #expect(events[0].details["scope"] == "global")
        #expect(events[0].details["itemsRemoved"] == "12")
        #expect(events[1].reason == "sign-in")
        #expect(events[2].reason == "shift-end")
        #expect(events[2].details["from"] == Person.ada.username)
        #expect(events[2].details["to"] == Person.bob.username)
        #expect(try fixture.checkpointSequences().contains(events[0].sequence))
        #expect(try fixture.tombstones().first?["reason"] as? String == "shift-end")
        try fixture.expectAuditIntact()
    }

    @Test func aFailedSignInAfterTheSwitchKeepsTheSignOutAndIsReported() throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        try fixture.signIn(.ada, app: scanner)
        try fixture.signIn(.ada, app: scanner, group: KioskApps.scannerGroup)
        let before = try fixture.lastSequence
        // The next worker's response names nobody: no client_info, no id_token.
        let unusable = TokenResponse(
            accessToken: "at-next",
            refreshToken: "rt-next",
            scope: "User.Read",
            expiresIn: 3600
        )

        let outcome = try fixture.accounts.switchAccount(
            to: unusable,
            context: KioskAuthority.context(),
            app: scanner,
            reason: .idle
        )
        #expect(outcome.signedIn == nil)
        let error = try #require(outcome.signInError)
        #expect(error.code == .tokenCache)
        #expect(!error.message.contains("at-next"))
        #expect(outcome.signedOut?.account == Person.ada.account)
        #expect(outcome.signedOut?.itemsRemoved == 8)

        // The sign-out stands: nobody current, Ada's credentials gone, nothing of the failed sign-in stored.
        #expect(
            try fixture.accounts.currentAccount(for: scanner).pair == (nil, Person.ada.account)
                as (DeviceAccount?, DeviceAccount?)
        )
        #expect(try fixture.counts(of: .ada).values.allSatisfy { $0 == 0 })
        let left = try fixture.store.metadata(
            matching: ItemQuery(type: KeychainItemType.accessToken),
            as: try fixture.inspector
        )
        #expect(left.isEmpty, "\(left)")
        #expect(try fixture.status(of: .ada)?.signOutReason == .idle)
        #expect(try fixture.accounts.accounts().filter(\.signedIn).isEmpty)

        // Audited: the sign-out with the switch's correlation id, and no sign-in or switch event.
        let events = try fixture.events(after: before)
        #expect(events.map(\.type) == [.accountSignedOut])
        #expect(events.first?.correlationID == outcome.correlationID)
        #expect(events.first?.reason == "idle")
        try fixture.expectAuditIntact()
    }

    @Test func aSwitchToAResponseWithAMalformedIDTokenStillEndsTheShift() throws {
        let fixture = try AccountFixture()
        let timeclock = try fixture.timeclock
        try fixture.signIn(.ada, app: timeclock)
        var broken = Person.bob.response()
        broken.idToken = "not-a-jwt"
        let outcome = try fixture.accounts.switchAccount(to: broken, context: KioskAuthority.context(), app: timeclock)
        #expect(outcome.signInError?.code == .tokenCache)
        #expect(outcome.signedOut?.account == Person.ada.account)
        #expect(try fixture.accounts.currentAccount(for: timeclock).current == nil)
        #expect(try fixture.counts(of: .bob).values.allSatisfy { $0 == 0 })
    }

    @Test func aSwitchWithNobodySignedInIsJustASignIn() throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        let before = try fixture.lastSequence
        let outcome = try fixture.accounts.switchAccount(
            to: Person.bob.response(),
            context: KioskAuthority.context(),
            app: scanner
        )
        #expect(outcome.signedOut == nil)
        #expect(outcome.signedIn == Person.bob.account)
        #expect(outcome.signInError == nil)
        let events = try fixture.events(after: before)
        #expect(events.map(\.type) == [.accountSignedIn, .accountSwitched])
        #expect(events.allSatisfy { $0.correlationID == outcome.correlationID })
        #expect(events.last?.details["from"] == "(nobody)")
        #expect(events.last?.details["to"] == Person.bob.username)
        #expect(try fixture.accounts.currentAccount(for: scanner).current == Person.bob.account)
    }

    // MARK: - Change stream, in one process

    @Test(.timeLimit(.minutes(1)))
    func theChangeStreamReportsSignInSwitchAndSignOutWithoutPolling() async throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        // Another store object on the same directory, as another process would have; a fallback re-check
        // far beyond the test's bounds, so only the change signal can deliver the events in time.
        let watcher = try fixture.secondManager()
        let stream = watcher.changes(fallbackInterval: .seconds(600))
        let before = try fixture.lastSequence

        try fixture.signIn(.ada, app: scanner)
        _ = try fixture.accounts.switchAccount(
            to: Person.bob.response(),
            context: KioskAuthority.context(),
            app: scanner
        )
        try fixture.accounts.signOut(app: scanner, reason: .user)
        // A sign-out that finds nobody to sign out produces nothing.
        _ = caughtError { try fixture.accounts.signOut(app: scanner, reason: .user) }

        let changes = await collect(stream, count: 5, timeout: .seconds(30))
        #expect(changes.map(\.kind) == [.signedIn, .signedOutGlobally, .signedIn, .switched, .signedOutGlobally])
        #expect(
            changes.map(\.account) == [
                Person.ada.username, Person.ada.username, Person.bob.username, Person.bob.username, Person.bob.username,
            ]
        )
        let sequences = try fixture.accountEvents(after: before).map(\.sequence)
        #expect(changes.map(\.sequence) == sequences)
        #expect(
            try watcher.currentAccount(for: scanner).pair == (nil, Person.bob.account)
                as (DeviceAccount?, DeviceAccount?)
        )
    }

    @Test(.timeLimit(.minutes(1)))
    func aForcedModeChangeIsAnAccountChange() async throws {
        let fixture = try AccountFixture()
        try fixture.signIn(.ada, app: try fixture.scanner)
        let stream = try fixture.secondManager().changes(fallbackInterval: .seconds(600))
        try fixture.base.provision(try Policies.edited(by: Policies.setMode("private")), force: true)
        let changes = await collect(stream, count: 1, timeout: .seconds(30))
        #expect(changes.map(\.kind) == [.deviceModeChanged])
    }
}

/// The first `count` elements of `stream`, or fewer if `timeout` passes first.
func collect(_ stream: AsyncStream<AccountChange>, count: Int, timeout: Duration) async -> [AccountChange] {
    let consumer = Task {
        var received: [AccountChange] = []
        for await change in stream {
            received.append(change)
            if received.count == count { break }
        }
        return received
    }
    let timer = Task {
        try? await Task.sleep(for: timeout)
        consumer.cancel()
    }
    let received = await consumer.value
    timer.cancel()
    return received
}
