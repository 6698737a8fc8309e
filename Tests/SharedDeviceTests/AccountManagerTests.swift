import Foundation
import IdentityClient
import KeychainStore
import ProcessTestSupport
import SharedDevice
import StoreTestSupport
import Testing

// MARK: - Fixtures shared by the account manager's tests

/// The kiosk's identity provider as the kiosk policy names it: the local OIDC issuer on 127.0.0.1:4593,
/// one client id for all kiosk apps, and the tenant the workers belong to: the account-worker's
/// (ProcessTestSupport's `AccountWorkerFixture`).
enum KioskAuthority {
    static let clientID = AccountWorkerFixture.clientID
    static let environment = AccountWorkerFixture.environment
    static let tenant = AccountWorkerFixture.tenant
    static let signInScopes = AccountWorkerFixture.signInScopes

    static func context(scopes: [String] = signInScopes, clientID: String = clientID) -> TokenRequestContext {
        TokenRequestContext(clientID: clientID, environment: environment, realm: tenant, requestedScopes: scopes)
    }
}

/// A person who signs in on a device, with token responses as the identity provider returns them:
/// `client_info` base64url `{"uid","utid"}` and an unsigned JWT `id_token` with the claims MSAL reads.
struct Person: Sendable, CustomStringConvertible {
    let uid: String
    let username: String
    let name: String

    /// The account-worker's worker.
    static let jo = Person(
        uid: AccountWorkerFixture.workerUID,
        username: AccountWorkerFixture.workerUsername,
        name: AccountWorkerFixture.workerName
    )
    static let ada = Person(
        uid: "5f7c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f",
        username: "ada@contoso.example",
        name: "Ada Worker"
    )
    static let bob = Person(
        uid: "8b1e2f3a-4c5d-4e6f-9a0b-1c2d3e4f5a6b",
        username: "bob@contoso.example",
        name: "Bob Worker"
    )

    var description: String { username }
    var homeAccountID: String { "\(uid).\(KioskAuthority.tenant)" }
    /// The keychain account attribute of every credential of this person (`<home_account_id>-<environment>`).
    var cacheAccount: String { "\(homeAccountID)-\(KioskAuthority.environment)".lowercased() }

    /// The account apps are given for this person.
    var account: DeviceAccount {
        DeviceAccount(
            homeAccountID: homeAccountID,
            environment: KioskAuthority.environment,
            realm: KioskAuthority.tenant,
            username: username,
            name: name,
            localAccountID: uid
        )
    }

    var clientInfo: String {
        let json = try! JSONSerialization.data(
            withJSONObject: ["uid": uid, "utid": KioskAuthority.tenant],
            options: [.sortedKeys]
        )
        return Base64URL.encode(json)
    }

    var idToken: String {
        try! CacheFixture.jwt([
            "aud": KioskAuthority.clientID, "iss": "http://\(KioskAuthority.environment)/api/oidc", "name": name,
            "oid": uid,
            "preferred_username": username, "sub": "sub-\(uid.prefix(8))", "tid": KioskAuthority.tenant, "ver": "2.0",
        ])
    }

    /// A sign-in response: access, refresh and ID token with `client_info`.
    func response(
        accessToken: String? = nil,
        refreshToken: String? = nil,
        scope: String = "openid profile offline_access User.Read"
    ) -> TokenResponse {
        TokenResponse(
            accessToken: accessToken ?? "at-\(uid.prefix(8))",
            refreshToken: refreshToken ?? "rt-\(uid.prefix(8))",
            idToken: idToken,
            clientInfo: clientInfo,
            scope: scope,
            expiresIn: 3600,
            extendedExpiresIn: 7200
        )
    }
}

/// A provisioned device with its account manager on a fresh store, clock moved by hand.
final class AccountFixture {
    let base: DeviceFixture
    let accounts: AccountManager

    var store: KeychainStore { base.store }
    var device: ManagedDevice { base.device }
    var clock: FakeClock { base.clock }

    /// Provisions `policy` (the kiosk policy by default; `nil` leaves the device unprovisioned).
    init(policy: Data? = nil, provision: Bool = true) throws {
        base = try DeviceFixture()
        accounts = AccountManager(device: base.device)
        if provision { try base.provision(try policy ?? Policies.kiosk()) }
    }

    /// Another process's view: a second store object, device and account manager on the same directory.
    func secondManager() throws -> AccountManager {
        AccountManager(device: try base.secondDevice())
    }

    /// The app's identity from the device policy.
    func app(_ appID: String) throws -> AppIdentity {
        try #require(try device.appIdentity(appID, actor: appID))
    }

    var scanner: AppIdentity { get throws { try app(KioskApps.scannerID) } }
    var timeclock: AppIdentity { get throws { try app(KioskApps.timeclockID) } }

    /// Every access group the policy gives an app, sorted.
    var appGroups: [String] {
        get throws { Array(Set(try #require(try device.policy()).apps.flatMap(\.accessGroups))).sorted() }
    }

    /// An identity entitled to every app group, to count items independently of any one app's view.
    var inspector: AppIdentity {
        get throws { try AppIdentity(appID: "test.inspector", accessGroups: try appGroups) }
    }

    @discardableResult
    func signIn(
        _ person: Person,
        app: AppIdentity,
        group: String? = nil,
        accessToken: String? = nil,
        scope: String = "openid profile offline_access User.Read"
    ) throws -> DeviceAccount {
        clock.advance(by: 1)
        return try accounts.signIn(
            person.response(accessToken: accessToken, scope: scope),
            context: KioskAuthority.context(),
            app: app,
            accessGroup: group
        )
    }

    /// The person's credential and account items in `group`, by keychain item type.
    func itemTypes(of person: Person, in group: String) throws -> [UInt32: Int] {
        var types: [UInt32: Int] = [:]
        for item in try store.metadata(
            matching: ItemQuery(accessGroup: group, account: person.cacheAccount),
            as: try inspector
        ) {
            types[item.type ?? 0, default: 0] += 1
        }
        return types
    }

    /// How many items of the person's account `group` holds.
    func count(of person: Person, in group: String) throws -> Int {
        try store.metadata(matching: ItemQuery(accessGroup: group, account: person.cacheAccount), as: try inspector)
            .count
    }

    /// Items of the person, per app group.
    func counts(of person: Person) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for group in try appGroups { counts[group] = try count(of: person, in: group) }
        return counts
    }

    /// Every item in the app groups (credentials, app metadata and the apps' own items).
    func totalAppItems() throws -> Int {
        try store.metadata(matching: .all, as: try inspector).count
    }

    func status(of person: Person) throws -> AccountStatus? {
        try accounts.accounts().first { $0.account.homeAccountID == person.homeAccountID }
    }

    func events(after sequence: Int64 = 0, types: Set<AuditEventType> = []) throws -> [AuditEvent] {
        try device.auditEvents(matching: AuditFilter(types: types, afterSequence: sequence))
    }

    func accountEvents(after sequence: Int64 = 0) throws -> [AuditEvent] {
        try events(after: sequence, types: [.accountSignedIn, .accountSignedOut, .accountSwitched])
    }

    var lastSequence: Int64 { get throws { try device.lastAuditSequence() } }

    /// Sequence numbers that carry a signed checkpoint.
    func checkpointSequences() throws -> Set<Int64> {
        Set(try base.raw().checkpoints().map(\.sequence))
    }

    /// The wipe tombstones, as the device administrator reads them (JSON objects).
    func tombstones() throws -> [[String: Any]] {
        let items: [KeychainItem]
        do {
            items = try store.findAll(
                ItemQuery(accessGroup: AccessGroup.device, service: "wipe-tombstone"),
                as: .deviceAdministrator
            )
        } catch {
            #expect(error.code == .itemNotFound, "\(error)")
            return []
        }
        return try items.map { try #require(try JSONSerialization.jsonObject(with: $0.secret) as? [String: Any]) }
    }

    /// Whether the audit log verifies, with the problems when it does not.
    func expectAuditIntact(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let verification = try device.verifyAudit()
        #expect(verification.isIntact, "\(verification.problems)", sourceLocation: sourceLocation)
    }
}

/// MSAL's keychain item types (`kSecAttrType`) for the cache entries.
enum KeychainItemType {
    static let accessToken: UInt32 = 2001
    static let refreshToken: UInt32 = 2002
    static let idToken: UInt32 = 2003
    static let account: UInt32 = 1003
    static let appMetadata: UInt32 = 3001
}

/// The private-mode policy with a second app, each with the shared `universalstorage` group and a group of its own.
enum PersonalApps {
    static let notesID = "com.contoso.fieldnotes"
    static let notesGroup = "com.contoso.fieldnotes"
    static let cameraID = "com.contoso.fieldcamera"
    static let cameraGroup = "com.contoso.fieldcamera"

    static func policy() throws -> Data {
        try Policies.edited("personal.json") { document in
            var apps = document["apps"] as! [[String: Any]]
            apps.append(["id": cameraID, "accessGroups": [AccessGroup.universalStorage, cameraGroup], "uid": 1004])
            document["apps"] = apps
        }
    }
}

// MARK: - Current account, sign-in and token calls

/// `currentAccount`, sign-in with single sign-on across the kiosk's apps, the refusal of a second
/// worker, and the token call errors (MSAL's no current account / current account mismatch).
struct AccountManagerTests {
    @Test func nobodyIsSignedInOnAFreshKiosk() throws {
        let fixture = try AccountFixture()
        let current = try fixture.accounts.currentAccount(for: try fixture.scanner)
        #expect(current.current == nil)
        #expect(current.previous == nil)
        #expect(!current.changed)
        #expect(try fixture.accounts.accounts().isEmpty)
        #expect(try fixture.accountEvents().isEmpty)
    }

    @Test func signInInOneAppIsSingleSignOnInTheOther() throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        let timeclock = try fixture.timeclock
        let before = try fixture.lastSequence

        let account = try fixture.signIn(.ada, app: scanner)
        #expect(account == Person.ada.account)

        // The scanner made the sign-in: its principal is Ada from now on.
        let scannerView = try fixture.accounts.currentAccount(for: scanner)
        #expect(scannerView.current == Person.ada.account)
        #expect(scannerView.previous == Person.ada.account)
        #expect(!scannerView.changed)

        // The timeclock never signed in, yet sees the same current account (shared mode: one worker per device).
        let first = try fixture.accounts.currentAccount(for: timeclock)
        #expect(first.current == Person.ada.account)
        #expect(first.previous == nil)
        #expect(first.changed)
        let second = try fixture.accounts.currentAccount(for: timeclock)
        #expect(second.pair.current == Person.ada.account)
        #expect(second.pair.previous == Person.ada.account)
        #expect(!second.changed)

        // …and can use the tokens the scanner's sign-in cached in MSAL's shared group: the refresh token
        // for a silent call, the access token, the account.
        let cache = fixture.accounts.tokenCache
        let refresh = try cache.refreshToken(
            homeAccountID: Person.ada.homeAccountID,
            environment: KioskAuthority.environment,
            clientID: KioskAuthority.clientID,
            as: timeclock,
            in: fixture.store
        )
        #expect(refresh?.secret == "rt-5f7c1d2e")
        let token = try fixture.accounts.accessToken(
            for: timeclock,
            clientID: KioskAuthority.clientID,
            scopes: ["User.Read"]
        )
        #expect(token?.secret == "at-5f7c1d2e")
        let cached = try cache.account(
            homeAccountID: Person.ada.homeAccountID,
            environment: KioskAuthority.environment,
            as: timeclock,
            in: fixture.store
        )
        #expect(cached?.username == Person.ada.username)
        // Everything is in the shared group; the apps' own groups hold nothing of Ada.
        #expect(
            try fixture.itemTypes(of: .ada, in: AccessGroup.adalCache)
                == [
                    KeychainItemType.accessToken: 1, KeychainItemType.refreshToken: 1, KeychainItemType.idToken: 1,
                    KeychainItemType.account: 1,
                ]
        )
        #expect(try fixture.count(of: .ada, in: KioskApps.scannerGroup) == 0)
        #expect(try fixture.count(of: .ada, in: KioskApps.timeclockGroup) == 0)

        // The timeclock signing the same worker in (into its own group) is single sign-on, not a second sign-in.
        let again = try fixture.signIn(
            .ada,
            app: timeclock,
            group: KioskApps.timeclockGroup,
            accessToken: "at-timeclock"
        )
        #expect(again == Person.ada.account)
        #expect(try fixture.count(of: .ada, in: KioskApps.timeclockGroup) == 4)
        // The scanner cannot see the timeclock's own group.
        let scannerTokens = try fixture.store.metadata(
            matching: ItemQuery(account: Person.ada.cacheAccount, type: KeychainItemType.accessToken),
            as: scanner
        )
        #expect(scannerTokens.map(\.accessGroup) == [AccessGroup.adalCache])

        // One device-level sign-in, audited once, by the app that made it.
        let events = try fixture.accountEvents(after: before)
        try #require(events.count == 1, "\(events)")
        #expect(events[0].type == .accountSignedIn)
        #expect(events[0].actor == KioskApps.scannerID)
        #expect(events[0].account == Person.ada.username)
        #expect(events[0].reason == "sign-in")
        #expect(events[0].details["mode"] == "shared")
        #expect(events[0].details["homeAccountId"] == Person.ada.homeAccountID)
        #expect(events[0].details["environment"] == KioskAuthority.environment)

        let statuses = try fixture.accounts.accounts()
        try #require(statuses.count == 1)
        #expect(statuses[0].account == Person.ada.account)
        #expect(statuses[0].signedIn)
        // the first sign-in's time, kept by SSO
        #expect(statuses[0].signedInAt == FakeClock.start.addingTimeInterval(1))
        #expect(statuses[0].signedOutAt == nil)
        #expect(statuses[0].signOutReason == nil)
        try fixture.expectAuditIntact()
    }

    @Test func aSecondWorkerIsRefusedWhileOneIsSignedInAndNothingOfTheirsIsStored() throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        let timeclock = try fixture.timeclock
        try fixture.signIn(.ada, app: scanner)
        let before = try fixture.lastSequence
        let itemsBefore = try fixture.totalAppItems()

        for (app, group) in [(timeclock, nil), (scanner, nil), (timeclock, KioskApps.timeclockGroup)]
            as [(AppIdentity, String?)]
        {
            let error = expectSharedDeviceError(.accountAlreadySignedIn) {
                try fixture.signIn(.bob, app: app, group: group)
            }
            #expect(error?.code.description == "an account is already signed in")
            #expect(
                error?.message.contains("an account is already signed in") == true,
                "\(error.map { "\($0)" } ?? "")"
            )
            #expect(error?.message.contains("at-8b1e2f3a") == false, "a token in an error message")
        }

        // The refused sign-in rolled back: none of Bob's tokens, Ada still current, nothing audited.
        let bobItems = try fixture.counts(of: .bob)
        #expect(bobItems.values.allSatisfy { $0 == 0 }, "\(bobItems)")
        #expect(try fixture.totalAppItems() == itemsBefore)
        #expect(try fixture.accounts.currentAccount(for: timeclock).current == Person.ada.account)
        #expect(try fixture.accounts.accounts().map(\.account) == [Person.ada.account])
        #expect(try fixture.lastSequence == before)
    }

    @Test func tokenCallsWithNobodySignedInFailWithNoCurrentAccount() throws {
        let fixture = try AccountFixture()
        let error = expectSharedDeviceError(.noCurrentAccount) {
            try fixture.accounts.accessToken(
                for: try fixture.scanner,
                clientID: KioskAuthority.clientID,
                scopes: ["User.Read"]
            )
        }
        #expect(error?.code.description == "no current account")
        expectSharedDeviceError(.noCurrentAccount) {
            try fixture.accounts.accessToken(
                for: try fixture.timeclock,
                clientID: KioskAuthority.clientID,
                scopes: ["User.Read"],
                account: Person.ada.account
            )
        }

        // After a sign-out, the same again.
        try fixture.signIn(.ada, app: try fixture.scanner)
        try fixture.accounts.signOut(app: try fixture.scanner, reason: .user)
        expectSharedDeviceError(.noCurrentAccount) {
            try fixture.accounts.accessToken(
                for: try fixture.timeclock,
                clientID: KioskAuthority.clientID,
                scopes: ["User.Read"]
            )
        }
    }

    @Test func tokenCallsForAnotherAccountFailWithCurrentAccountMismatch() throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        let timeclock = try fixture.timeclock
        try fixture.signIn(.ada, app: scanner)

        for app in [scanner, timeclock] {
            let error = expectSharedDeviceError(.currentAccountMismatch) {
                try fixture.accounts.accessToken(
                    for: app,
                    clientID: KioskAuthority.clientID,
                    scopes: ["User.Read"],
                    account: Person.bob.account
                )
            }
            #expect(error?.code.description == "current account mismatch")
            #expect(error?.message.contains(Person.bob.username) == true)
        }
        // The current account, named or not, gets its token; an uncached scope gives nil (refresh next).
        let named = try fixture.accounts.accessToken(
            for: timeclock,
            clientID: KioskAuthority.clientID,
            scopes: ["User.Read"],
            account: Person.ada.account
        )
        #expect(named?.secret == "at-5f7c1d2e")
        #expect(named?.homeAccountID == Person.ada.homeAccountID)
        #expect(
            try fixture.accounts.accessToken(for: scanner, clientID: KioskAuthority.clientID, scopes: ["User.Read"])?
                .secret == "at-5f7c1d2e"
        )
        #expect(
            try fixture.accounts.accessToken(for: scanner, clientID: KioskAuthority.clientID, scopes: ["Mail.Send"])
                == nil
        )
        // Only the account's ids matter, not how its display fields read.
        var renamed = Person.ada.account
        renamed.username = "someone-else@contoso.example"
        renamed.homeAccountID = renamed.homeAccountID.uppercased()
        #expect(
            try fixture.accounts.accessToken(
                for: scanner,
                clientID: KioskAuthority.clientID,
                scopes: ["User.Read"],
                account: renamed
            ) != nil
        )
    }

    @Test func previousAccountIsRebuiltFromStoredIdsAfterAGlobalWipe() throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        let timeclock = try fixture.timeclock
        try fixture.signIn(.ada, app: scanner)
        _ = try fixture.accounts.currentAccount(for: timeclock)  // the timeclock has seen Ada

        try fixture.accounts.signOut(app: timeclock, reason: .shiftEnd)
        #expect(try fixture.counts(of: .ada).values.allSatisfy { $0 == 0 })

        for app in [scanner, timeclock] {
            for _ in 0..<2 {  // asking again does not clear it
                let view = try fixture.accounts.currentAccount(for: app)
                #expect(view.current == nil, "\(app.appID)")
                // Every field survives, though the credentials (ID token, account entry) are gone.
                #expect(view.previous == Person.ada.account, "\(app.appID)")
                #expect(view.changed)
            }
        }
        // A second process sees the same (it is stored, not remembered in memory).
        let other = try fixture.secondManager()
        #expect(try other.currentAccount(for: scanner).previous == Person.ada.account)

        // The next worker: current Bob, previous still Ada at the first call, then Bob.
        try fixture.signIn(.bob, app: scanner)
        let first = try fixture.accounts.currentAccount(for: timeclock)
        #expect(first.current == Person.bob.account)
        #expect(first.previous == Person.ada.account)
        #expect(first.changed)
        let second = try fixture.accounts.currentAccount(for: timeclock)
        #expect(second.previous == Person.bob.account)
        #expect(!second.changed)
    }

    @Test func previousAccountSurvivesAForcedModeChangeThatShredsEveryGroup() throws {
        let fixture = try AccountFixture()
        let scanner = try fixture.scanner
        try fixture.signIn(.ada, app: scanner)
        try fixture.signIn(.ada, app: try fixture.timeclock, group: KioskApps.timeclockGroup)

        let (outcome, _) = try fixture.base.provision(try Policies.edited(by: Policies.setMode("private")), force: true)
        #expect(outcome == .modeChanged)

        #expect(try fixture.counts(of: .ada).values.allSatisfy { $0 == 0 })
        let view = try fixture.accounts.currentAccount(for: try fixture.scanner)
        #expect(view.current == nil)
        #expect(view.previous == Person.ada.account)
        let status = try #require(try fixture.status(of: .ada))
        #expect(!status.signedIn)
        #expect(status.signOutReason == .admin)
        // A private device has no device-wide current account: Bob may sign in for one app now.
        try fixture.signIn(.bob, app: try fixture.timeclock)
        #expect(try fixture.accounts.currentAccount(for: try fixture.timeclock).current == Person.bob.account)
        #expect(try fixture.accounts.currentAccount(for: try fixture.scanner).current == nil)
    }

    @Test func anUnprovisionedDeviceIsPrivateAndUnaudited() throws {
        let fixture = try AccountFixture(provision: false)
        // No policy: the apps assert their own entitlements (in-process), and accounts are per app.
        try fixture.signIn(.ada, app: KioskApps.scanner)
        try fixture.signIn(.bob, app: KioskApps.timeclock, group: KioskApps.timeclockGroup)
        #expect(try fixture.accounts.currentAccount(for: KioskApps.scanner).current == Person.ada.account)
        #expect(try fixture.accounts.currentAccount(for: KioskApps.timeclock).current == Person.bob.account)
        let outcome = try fixture.accounts.signOut(app: KioskApps.timeclock, reason: .user)
        #expect(!outcome.global)
        #expect(outcome.accessGroups == 2)
        #expect(
            try fixture.accounts.currentAccount(for: KioskApps.timeclock).pair == (nil, Person.bob.account)
                as (DeviceAccount?, DeviceAccount?)
        )
        #expect(try fixture.accounts.currentAccount(for: KioskApps.scanner).current == Person.ada.account)
        #expect(try fixture.device.auditEvents().isEmpty, "nothing to sign events with before provisioning")
    }

    @Test func anUnusableTokenResponseChangesNothing() throws {
        let fixture = try AccountFixture()
        let before = try fixture.lastSequence
        // No client_info, no id_token and no home account id in the context: nobody to sign in.
        let response = TokenResponse(
            accessToken: "at-anonymous",
            refreshToken: "rt-anonymous",
            scope: "User.Read",
            expiresIn: 3600
        )
        expectSharedDeviceError(.tokenCache) {
            try fixture.accounts.signIn(response, context: KioskAuthority.context(), app: try fixture.scanner)
        }
        #expect(try fixture.totalAppItems() == 0)
        #expect(try fixture.accounts.accounts().isEmpty)
        #expect(try fixture.accounts.currentAccount(for: try fixture.scanner).current == nil)
        #expect(try fixture.lastSequence == before)
    }

    @Test func signInToAGroupTheAppIsNotEntitledToIsRefusedAndChangesNothing() throws {
        let fixture = try AccountFixture()
        let error = caughtError {
            try fixture.signIn(.ada, app: try fixture.scanner, group: KioskApps.timeclockGroup)
        }
        let shared = try #require(error as? SharedDeviceError, "\(String(describing: error))")
        #expect(shared.code == .store)
        #expect(shared.storeError?.code == .missingEntitlement)
        #expect(try fixture.totalAppItems() == 0)
        #expect(try fixture.accounts.currentAccount(for: try fixture.scanner).current == nil)
        #expect(try fixture.accountEvents().isEmpty)
    }
}
