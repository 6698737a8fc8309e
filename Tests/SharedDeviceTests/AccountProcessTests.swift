import Foundation
import KeychainStore
import ProcessTestSupport
import SharedDevice
import StoreTestSupport
import Synchronization
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Real processes on one device (Tests/Workers/account-worker): a process waiting on `AccountManager.changes()`
/// learns of another process's global sign-out, and a sign-out of hundreds of tokens killed with SIGKILL
/// at random points is never half done. Every time bound is a generous safety net against a hung child,
/// not a performance assertion.
@Suite(.serialized, .timeLimit(.minutes(5)), .tags(.integration))
struct AccountProcessTests {
    static let kioskPolicy = Policies.directory.appendingPathComponent("kiosk.json").path

    /// `account-worker fill`: provisions `directory` from the kiosk policy, signs the worker in and caches `tokens`
    /// access tokens per group, in a process of its own; returns it, finished.
    static func fill(_ directory: TemporaryStateDirectory, tokens: Int) async throws -> ChildProcess {
        let fill = try ChildProcess(
            product: "account-worker",
            ["fill", directory.url.path, "\(tokens)", "--policy", kioskPolicy]
        )
        try await fill.expectSuccess("fill")
        return fill
    }

    // MARK: - Cross-process account changes

    @Test func aGlobalSignOutInOneProcessReachesAProcessWaitingForChanges() async throws {
        let directory = TemporaryStateDirectory("account-events")
        let fill = try await Self.fill(directory, tokens: 20)
        #expect(fill.lines(prefix: "filled") == ["filled 20"])

        // B: the timeclock, waiting. Its fallback re-check is 600 s, so only the change signal can wake it
        // within the bounds below.
        let waiter = try ChildProcess(
            product: "account-worker",
            ["wait", directory.url.path, KioskApps.timeclockID, "--fallback", "600"]
        )
        defer { waiter.killIfRunning() }
        let ready = await waiter.waitForLines(atLeast: 1, prefix: "ready", timeout: 60)
        try #require(ready, "the waiting process never got ready; stderr: \(waiter.standardError)")
        let initial = try #require(waiter.lines(prefix: "initial ").first)
        let initialView = try Self.currentAccountJSON(String(initial.dropFirst("initial ".count)))
        #expect(initialView.current?["homeAccountId"] as? String == Person.jo.homeAccountID)

        // A: the scanner ends the shift.
        let started = Date()
        let signer = try ChildProcess(
            product: "account-worker",
            ["signout", directory.url.path, KioskApps.scannerID, "--reason", "shift-end"]
        )
        try await signer.expectSuccess("signout")
        #expect(signer.lines(prefix: "signed-out") == ["signed-out 68"])  // 3 × 20 fill tokens + 2 × 4 sign-in items

        let exited = await waiter.waitForExit(timeout: 60)
        try #require(
            exited,
            "the waiting process did not receive the sign-out within 60 s; stdout: \(waiter.standardOutput) stderr: \(waiter.standardError)"
        )
        #expect(Date().timeIntervalSince(started) < 60)
        #expect(
            waiter.exitedNormally && waiter.status == 0,
            "\(waiter.reasonDescription) \(waiter.status): \(waiter.standardError)"
        )
        #expect(waiter.standardError.isEmpty, "\(waiter.standardError)")

        // Exactly one event, the global sign-out, with the audit event's sequence.
        let store = try openStore(directory)
        let device = ManagedDevice(store: store)
        let signOut = try #require(try device.auditEvents(matching: AuditFilter(types: [.accountSignedOut])).last)
        #expect(signOut.actor == KioskApps.scannerID)
        #expect(signOut.reason == "shift-end")
        #expect(waiter.lines(prefix: "event ") == ["event signed_out \(Person.jo.username) \(signOut.sequence)"])

        // After the event, B's currentAccount: nobody current, previous the worker.
        let currentLine = try #require(waiter.lines(prefix: "current ").first, "stdout: \(waiter.standardOutput)")
        let view = try Self.currentAccountJSON(String(currentLine.dropFirst("current ".count)))
        #expect(view.current == nil)
        let previous = try #require(view.previous)
        #expect(previous["homeAccountId"] as? String == Person.jo.homeAccountID)
        #expect(previous["environment"] as? String == KioskAuthority.environment)
        #expect(previous["username"] as? String == Person.jo.username)
        #expect(previous["name"] as? String == Person.jo.name)
        #expect(try device.verifyAudit().isIntact)
        withExtendedLifetime(directory) {}
    }

    /// A silent token answered from memory while nothing is committed (`KeychainStore.changeStampIfUnchanged`,
    /// no transaction) stops being answered the moment another process commits a global sign-out: the next call
    /// is `noCurrentAccount`, and the current account is nobody.
    @Test func anAnswerKeptInMemoryEndsWithAnotherProcesssSignOut() async throws {
        let directory = TemporaryStateDirectory("account-memory")
        _ = try await Self.fill(directory, tokens: 3)
        let store = try openStore(directory)
        let accounts = AccountManager(device: ManagedDevice(store: store))
        let scopes = [AccountWorkerFixture.fillScope(0)]
        let first = try accounts.silentCredentials(
            for: KioskApps.scanner,
            clientID: AccountWorkerFixture.clientID,
            scopes: scopes
        )
        #expect(first.account.homeAccountID == Person.jo.homeAccountID)
        #expect(try accounts.currentAccount(for: KioskApps.scanner).current?.homeAccountID == Person.jo.homeAccountID)
        // Nothing committed since: the answers come from memory.
        #expect(store.changeStampIfUnchanged() != nil)
        let again = try accounts.silentCredentials(
            for: KioskApps.scanner,
            clientID: AccountWorkerFixture.clientID,
            scopes: scopes
        )
        #expect(again.accessToken?.secret == first.accessToken?.secret && first.accessToken != nil)

        let signer = try ChildProcess(
            product: "account-worker",
            ["signout", directory.url.path, KioskApps.timeclockID, "--reason", "shift-end"]
        )
        try await signer.expectSuccess("signout")
        #expect(store.changeStampIfUnchanged() == nil)
        let error = caughtError {
            try accounts.silentCredentials(
                for: KioskApps.scanner,
                clientID: AccountWorkerFixture.clientID,
                scopes: scopes
            )
        }
        #expect((error as? SharedDeviceError)?.code == .noCurrentAccount, "\(String(describing: error))")
        #expect(try accounts.currentAccount(for: KioskApps.scanner).current == nil)
        withExtendedLifetime(directory) {}
    }

    // MARK: - SIGKILL during sign-out

    /// Tokens per group: three groups of 200 plus the sign-in items, so one sign-out removes 608 items.
    static let tokensPerGroup = 200
    /// Kills that must land inside a sign-out call (after `signing-out`, before `signed-out`).
    static let killsInsideSignOut = 4

    @Test func aSignOutKilledWithSIGKILLIsNeverPartial() async throws {
        let directory = TemporaryStateDirectory("account-sigkill")
        let n = Self.tokensPerGroup
        var expectedSignOuts = 0

        // How long a sign-out of a full kiosk takes on this machine and build: one, not killed, timed from
        // its `signing-out` line to its `signed-out` line as the thread reading its output saw them arrive.
        try await Self.fill(directory, n, round: -1)
        let timed = try ChildProcess(
            product: "account-worker",
            ["signout", directory.url.path, KioskApps.scannerID, "--reason", "shift-end"]
        )
        defer { timed.killIfRunning() }
        let ended = await timed.waitForLine(timeout: 60) { $0.hasPrefix("signed-out ") }
        try #require(
            ended == "signed-out \(3 * n + 8)" && timed.lines.first == "signing-out",
            "the timed sign-out printed \(timed.lines): \(timed.standardError)"
        )
        var signOutSpan = try #require(timed.arrival(ofLine: 1)) - (try #require(timed.arrival(ofLine: 0)))
        try await timed.expectSuccess("the timed sign-out")
        expectedSignOuts += 1
        do {
            let afterTimed = try KioskState(directory: directory, tokensPerGroup: n)
            #expect(afterTimed.kind == .signedOut, "after a completed sign-out: \(afterTimed)")
            try afterTimed.expectAuditAndStoreIntact(signIns: 1, signOuts: expectedSignOuts, round: -1)
        }

        var rounds = 0
        var inFlight = 0
        var completed = 0
        var beforeStart = 0
        var signIns = 1
        var state = KioskState.Kind.signedOut
        // At least 12 rounds; more (up to 40) until enough kills landed inside the sign-out call.
        while rounds < 12 || (inFlight < Self.killsInsideSignOut && rounds < 40) {
            if state != .fullySignedIn {
                try await Self.fill(directory, n, round: rounds)
                signIns += 1
            }
            let app = rounds % 2 == 0 ? KioskApps.scannerID : KioskApps.timeclockID
            // Every fourth round the kill comes while the worker still waits to begin (it would wait a minute);
            // the others at a random offset within 1.25 times the measured sign-out, after it began.
            let killBeforeStart = rounds % 4 == 3
            let worker = try ChildProcess(
                product: "account-worker",
                [
                    "signout", directory.url.path, app, "--reason", "shift-end",
                    "--after", killBeforeStart ? "60000" : "0",
                ]
            )
            defer { worker.killIfRunning() }
            if killBeforeStart {
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...200)))
                worker.killIfRunning()
            } else {
                // Sent by the thread that reads the `signing-out` line, the moment it reads it plus the offset.
                worker.signal(SIGKILL, afterLine: "signing-out", delay: signOutSpan * Double.random(in: 0...1.25))
            }
            let exited = await worker.waitForExit(timeout: 60)
            try #require(exited, "round \(rounds): the sign-out process did not end")

            let started = !worker.lines(prefix: "signing-out").isEmpty
            let acknowledged = !worker.lines(prefix: "signed-out").isEmpty
            if worker.killedBySignal == SIGKILL {
                #expect(worker.standardError.isEmpty, "round \(rounds): \(worker.standardError)")
                if !started { beforeStart += 1 } else if !acknowledged { inFlight += 1 }
            } else {
                #expect(
                    worker.exitedNormally && worker.status == 0 && acknowledged,
                    "round \(rounds): \(worker.reasonDescription) \(worker.status): \(worker.standardError)"
                )
                completed += 1
                // The first sign-out runs on a cold cache; later ones are often much faster. Aim the next kills
                // at the fastest sign-out seen, so they keep landing inside it.
                if let begun = worker.arrival(ofLine: 0), let ended = worker.arrival(ofLine: 1) {
                    signOutSpan = min(signOutSpan, ended - begun)
                }
            }
            if killBeforeStart {
                #expect(!started, "round \(rounds): the sign-out began although the worker was to wait a minute")
            }

            // Reopen (recovering whatever the killed process left in the WAL) and look.
            let observed = try KioskState(directory: directory, tokensPerGroup: n)
            state = observed.kind
            #expect(
                state == .fullySignedIn || state == .signedOut,
                "round \(rounds): partial state after a SIGKILL: \(observed)"
            )
            if acknowledged {
                #expect(state == .signedOut, "round \(rounds): an acknowledged sign-out is not durable: \(observed)")
            }
            if !started {
                #expect(state == .fullySignedIn, "round \(rounds): signed out before the sign-out began: \(observed)")
            }
            if state == .signedOut { expectedSignOuts += 1 }
            try observed.expectAuditAndStoreIntact(signIns: signIns, signOuts: expectedSignOuts, round: rounds)
            rounds += 1
        }
        // How the kills fell (before the call, inside it, after it finished) is random; the loop ran until
        // enough of them landed inside it, and every fourth round was killed before it began.
        #expect(
            inFlight >= Self.killsInsideSignOut,
            "only \(inFlight) kills landed inside a sign-out in \(rounds) rounds (\(beforeStart) before, \(completed) after; a sign-out takes \(signOutSpan))"
        )
        #expect(beforeStart >= rounds / 4, "\(beforeStart) kills before the sign-out began in \(rounds) rounds")
        withExtendedLifetime(directory) {}
    }

    /// `account-worker signout-loop`: sign-in (scanner), single sign-on (timeclock), fill and sign-out over
    /// and over, killed at a random point of any of them. Each step is one transaction, acknowledged on its
    /// own line once committed, so after every kill the store holds exactly the state of the last
    /// acknowledged step, or of the step after it (committed, not yet acknowledged) — never anything between.
    @Test func aSignInAndSignOutLoopKilledAnywhereLeavesOnlyWholeSteps() async throws {
        let directory = TemporaryStateDirectory("account-sigkill-loop")
        let n = 100
        // Provisioned up front (the worker's own provisioning is then a no-op): a kill in round 0 before
        // the worker got that far must still leave a device to inspect.
        _ = try ManagedDevice(store: openStore(directory)).provision(policyDocument: Policies.kiosk(), actor: "test")

        // One whole round, not killed: every step acknowledged in order, and how long a round takes here,
        // from the worker's start (opening the store included) to its exit.
        let spawned = ContinuousClock.now
        let timed = try ChildProcess(
            product: "account-worker",
            ["signout-loop", directory.url.path, "\(n)", "--rounds", "1"]
        )
        defer { timed.killIfRunning() }
        try await timed.expectSuccess("one round of signout-loop")
        let roundSpan = ContinuousClock.now - spawned
        #expect(
            timed.lines == [
                "signed-in scanner", "signed-in timeclock", "filled", "signing-out", "signed-out \(3 * n + 8)",
            ],
            "\(timed.lines)"
        )
        var signIns = 1
        var signOuts = 1
        var previous: KioskState.Kind
        do {
            let state = try KioskState(directory: directory, tokensPerGroup: n)
            #expect(state.kind == .signedOut, "after a whole round: \(state)")
            try state.expectAuditAndStoreIntact(signIns: signIns, signOuts: signOuts, round: -1)
            previous = state.kind
        }
        var landed: [String: Int] = [:]
        for round in 0..<12 {
            let worker = try ChildProcess(product: "account-worker", ["signout-loop", directory.url.path, "\(n)"])
            defer { worker.killIfRunning() }
            // Anywhere in the first round; every third round anywhere in the second, after a whole first one.
            if round % 3 == 2 {
                let first = await worker.waitForLine(timeout: 60) { LoopPosition(line: $0, n: n) == .signedOut }
                try #require(
                    first != nil,
                    "round \(round): the loop never finished its first round: \(worker.standardError)"
                )
            }
            try await Task.sleep(for: roundSpan * Double.random(in: 0...1.1))
            let wasRunning = worker.killIfRunning()
            let exited = await worker.waitForExit(timeout: 60)
            try #require(exited, "round \(round): the loop did not end")
            #expect(
                wasRunning && worker.killedBySignal == SIGKILL,
                "round \(round): \(worker.reasonDescription): \(worker.standardError)"
            )
            #expect(worker.standardError.isEmpty, "round \(round): \(worker.standardError)")

            // Every acknowledged step, in order, from the state the round began in.
            let lines = worker.lines
            var acknowledged = previous
            var position = LoopPosition.start
            var acknowledgedSignIns = 0
            var acknowledgedSignOuts = 0
            for line in lines {
                guard let step = LoopPosition(line: line, n: n) else {
                    Issue.record("round \(round): unexpected line \(line) in \(lines)")
                    continue
                }
                if step == .signingOut {
                    #expect(position == .filled, "round \(round): signing out after \(position) in \(lines)")
                    position = step
                    continue
                }
                #expect(step == position.next, "round \(round): \(step) acknowledged after \(position) in \(lines)")
                if step == .scannerSignedIn, acknowledged == .signedOut { acknowledgedSignIns += 1 }
                if step == .signedOut { acknowledgedSignOuts += 1 }
                acknowledged = acknowledged.after(step)
                position = step
            }
            // The step that may have committed without its line.
            let inFlight = position.next
            let observed = try KioskState(directory: directory, tokensPerGroup: n)
            let inFlightCommitted = observed.kind != acknowledged && observed.kind == acknowledged.after(inFlight)
            #expect(
                observed.kind == acknowledged || inFlightCommitted,
                "round \(round): the store is \(observed) but the acknowledged steps lead to \(acknowledged.rawValue) (next: \(inFlight)); output \(lines)"
            )
            landed["\(inFlight)\(inFlightCommitted ? " (committed)" : "")", default: 0] += 1

            signIns +=
                acknowledgedSignIns
                + (inFlightCommitted && inFlight == .scannerSignedIn && acknowledged == .signedOut ? 1 : 0)
            signOuts += acknowledgedSignOuts + (inFlightCommitted && inFlight == .signedOut ? 1 : 0)
            try observed.expectAuditAndStoreIntact(signIns: signIns, signOuts: signOuts, round: round)
            previous = observed.kind
        }
        // Where the kills landed is random; that every third round got through a whole round is not.
        #expect(signOuts >= 1 + 4, "\(signOuts - 1) sign-outs committed in 12 rounds (kills landed before: \(landed))")
        withExtendedLifetime(directory) {}
    }

    /// `account-worker fill`: provisions the kiosk if needed, signs Jo in for both apps and adds `n` tokens per group.
    static func fill(_ directory: TemporaryStateDirectory, _ n: Int, round: Int) async throws {
        let fill = try ChildProcess(
            product: "account-worker",
            ["fill", directory.url.path, "\(n)", "--policy", kioskPolicy]
        )
        try await fill.expectSuccess("round \(round): fill")
        #expect(fill.lines == ["filled \(n)"], "round \(round): \(fill.lines)")
    }

    // MARK: - Helpers

    static func currentAccountJSON(_ text: String) throws -> (current: [String: Any]?, previous: [String: Any]?) {
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
            "not JSON: \(text)"
        )
        #expect(object.keys.sorted() == ["current", "previous"])
        return (object["current"] as? [String: Any], object["previous"] as? [String: Any])
    }
}

// MARK: - Where the account-worker's loop is

/// A point in `account-worker signout-loop`'s round, as its output tells it.
enum LoopPosition: Equatable, CustomStringConvertible {
    /// Nothing printed yet.
    case start
    case scannerSignedIn, timeclockSignedIn, filled
    /// `signing-out` is printed just before the sign-out begins: not a step of its own.
    case signingOut
    case signedOut

    /// The position a line reports; `nil` for anything else (a sign-out that removed other than the
    /// `3 n + 8` items of a full kiosk included).
    init?(line: String, n: Int) {
        let words = line.split(separator: " ").map(String.init)
        switch (AccountWorkerFixture.Step(line: line), words.count > 1 ? words[1] : nil) {
        case (.signedIn?, "scanner"?) where words.count == 2: self = .scannerSignedIn
        case (.signedIn?, "timeclock"?) where words.count == 2: self = .timeclockSignedIn
        case (.filled?, nil): self = .filled
        case (.signingOut?, nil): self = .signingOut
        case (.signedOut?, let removed?) where words.count == 2 && removed == "\(3 * n + 8)": self = .signedOut
        default: return nil
        }
    }

    /// The step the worker takes after this point.
    var next: LoopPosition {
        switch self {
        case .start, .signedOut: .scannerSignedIn
        case .scannerSignedIn: .timeclockSignedIn
        case .timeclockSignedIn: .filled
        case .filled, .signingOut: .signedOut
        }
    }

    var description: String {
        switch self {
        case .start: "start"
        case .scannerSignedIn: "signed-in scanner"
        case .timeclockSignedIn: "signed-in timeclock"
        case .filled: "filled"
        case .signingOut: "signing-out"
        case .signedOut: "signed-out"
        }
    }
}

// MARK: - What a store holds of the account-worker's worker

/// The kiosk as found after a worker process ended: who is current and which of Jo's credentials each
/// group holds, counted as items and looked up through the token cache with each app's identity.
///
/// It keeps the store open: let it go before the next worker starts. A commit a worker had written to the
/// write-ahead log but not yet indexed when it was killed is settled (kept) by WAL recovery, which only a
/// connection opening the store while no other is open runs; a connection held open across the kill would
/// keep seeing the store without it until every connection closed, and then see it appear.
struct KioskState: CustomStringConvertible {
    enum Kind: String {
        /// Jo is current with every token: both apps' sign-in tokens and all fill tokens in every group.
        case fullySignedIn = "fully signed in"
        /// Jo is current after the scanner's sign-in only: its tokens in the shared group, nothing else.
        case scannerSignedIn = "signed in to the scanner"
        /// Jo is current after the scanner's sign-in and the timeclock's single sign-on, before the fill.
        case bothSignedIn = "signed in to both apps, not filled"
        /// Nobody current and not one of Jo's credentials anywhere.
        case signedOut = "signed out"
        case partial

        /// The state a committed loop step leads to from this one (`partial` where the loop cannot go).
        func after(_ step: LoopPosition) -> Kind {
            switch (step, self) {
            case (.start, _), (.signingOut, _): self
            case (.scannerSignedIn, .signedOut): .scannerSignedIn
            case (.scannerSignedIn, _): self
            case (.timeclockSignedIn, .scannerSignedIn), (.timeclockSignedIn, .bothSignedIn): .bothSignedIn
            case (.timeclockSignedIn, .fullySignedIn): .fullySignedIn
            case (.filled, .bothSignedIn), (.filled, .fullySignedIn): .fullySignedIn
            case (.signedOut, _): .signedOut
            default: .partial
            }
        }
    }

    let store: KeychainStore
    let device: ManagedDevice
    let current: DeviceAccount?
    let status: AccountStatus?
    /// Jo's items per group, and the access tokens among them.
    let items: [String: Int]
    let accessTokens: [String: Int]
    /// The fill scopes of Jo's access tokens per group (from the items' service attributes).
    let fillScopes: [String: Set<String>]
    /// How many of the sampled fill tokens each app found through the token cache with the worker's
    /// secret, of how many looked up.
    let lookups: (found: Int, total: Int)
    /// The sign-in access token each app finds through the token cache: its secret, or `nil`.
    let signInTokens: (scanner: String?, timeclock: String?)
    let kind: Kind

    init(directory: TemporaryStateDirectory, tokensPerGroup n: Int) throws {
        let store = try openStore(directory)
        self.store = store
        device = ManagedDevice(store: store)
        let accounts = AccountManager(device: device)
        let scanner = try #require(try device.appIdentity(KioskApps.scannerID, actor: "test"))
        let timeclock = try #require(try device.appIdentity(KioskApps.timeclockID, actor: "test"))
        let groups = [AccessGroup.adalCache, KioskApps.scannerGroup, KioskApps.timeclockGroup]
        let inspector = try AppIdentity(appID: "test.inspector", accessGroups: groups)
        let fillPrefix =
            TokenCache.serviceNamespace
            + "accesstoken-\(KioskAuthority.clientID)-\(KioskAuthority.tenant)-api://kiosk/".lowercased()
        var items: [String: Int] = [:]
        var accessTokens: [String: Int] = [:]
        var fillScopes: [String: Set<String>] = [:]
        for group in groups {
            let found = try store.metadata(
                matching: ItemQuery(accessGroup: group, account: Person.jo.cacheAccount),
                as: inspector
            )
            items[group] = found.count
            let tokens = found.filter { $0.type == KeychainItemType.accessToken }
            accessTokens[group] = tokens.count
            fillScopes[group] = Set(
                tokens.map(\.service).filter { $0.hasPrefix(fillPrefix) }.map {
                    "api://kiosk/" + $0.dropFirst(fillPrefix.count)
                }
            )
        }
        self.items = items
        self.accessTokens = accessTokens
        self.fillScopes = fillScopes
        current = try accounts.currentAccount(for: scanner).current
        status = try accounts.accounts().first { $0.account.homeAccountID == Person.jo.homeAccountID }

        func token(_ scopes: [String], as app: AppIdentity, in group: String) throws -> String? {
            try accounts.tokenCache.accessToken(
                homeAccountID: Person.jo.homeAccountID,
                environment: KioskAuthority.environment,
                clientID: KioskAuthority.clientID,
                realm: KioskAuthority.tenant,
                scopes: scopes,
                as: app,
                accessGroup: group,
                in: store
            )?.secret
        }
        var found = 0
        var total = 0
        for app in [scanner, timeclock] {
            for group in app.accessGroups {
                for index in [0, n / 2, n - 1] {
                    total += 1
                    let secret = try token([AccountWorkerFixture.fillScope(index)], as: app, in: group)
                    if secret == AccountWorkerFixture.fillAccessToken(group: group, index: index) { found += 1 }
                }
            }
        }
        lookups = (found, total)
        signInTokens = (
            try token(["User.Read"], as: scanner, in: AccessGroup.adalCache),
            try token(["User.Read"], as: timeclock, in: KioskApps.timeclockGroup)
        )

        let allFillScopes = Set((0..<n).map(AccountWorkerFixture.fillScope))
        let full = [AccessGroup.adalCache: n + 4, KioskApps.scannerGroup: n, KioskApps.timeclockGroup: n + 4]
        let fullTokens = [AccessGroup.adalCache: n + 1, KioskApps.scannerGroup: n, KioskApps.timeclockGroup: n + 1]
        let scannerOnly = [AccessGroup.adalCache: 4, KioskApps.scannerGroup: 0, KioskApps.timeclockGroup: 0]
        let bothApps = [AccessGroup.adalCache: 4, KioskApps.scannerGroup: 0, KioskApps.timeclockGroup: 4]
        let empty = [AccessGroup.adalCache: 0, KioskApps.scannerGroup: 0, KioskApps.timeclockGroup: 0]
        let joCurrent = current == Person.jo.account && status?.signedIn == true
        let scannerToken = signInTokens.scanner == AccountWorkerFixture.signInAccessToken(app: "scanner")
        let timeclockToken = signInTokens.timeclock == AccountWorkerFixture.signInAccessToken(app: "timeclock")
        let noFill = fillScopes.values.allSatisfy(\.isEmpty) && found == 0
        if joCurrent && scannerToken && timeclockToken && items == full && accessTokens == fullTokens
            && fillScopes.values.allSatisfy({ $0 == allFillScopes }) && found == total
        {
            kind = .fullySignedIn
        } else if joCurrent && scannerToken && timeclockToken && items == bothApps && noFill {
            kind = .bothSignedIn
        } else if joCurrent && scannerToken && signInTokens.timeclock == nil && items == scannerOnly && noFill {
            kind = .scannerSignedIn
        } else if current == nil && status?.signedIn != true && items == empty && found == 0
            && signInTokens.scanner == nil && signInTokens.timeclock == nil
        {
            kind = .signedOut
        } else {
            kind = .partial
        }
    }

    /// The audit log verifies and holds `signIns` sign-ins and `signOuts` sign-outs, each sign-out with a
    /// checkpoint; the store's items authenticate.
    func expectAuditAndStoreIntact(signIns: Int, signOuts: Int, round: Int) throws {
        let verification = try device.verifyAudit()
        #expect(verification.isIntact, "round \(round): \(verification.problems)")
        let signInEvents = try device.auditEvents(matching: AuditFilter(types: [.accountSignedIn]))
        #expect(
            signInEvents.count == signIns,
            "round \(round): \(signInEvents.count) sign-in events, expected \(signIns)"
        )
        #expect(signInEvents.allSatisfy { $0.account == Person.jo.username && $0.actor == KioskApps.scannerID })
        let events = try device.auditEvents(matching: AuditFilter(types: [.accountSignedOut]))
        #expect(events.count == signOuts, "round \(round): \(events.count) sign-out events, expected \(signOuts)")
        #expect(events.allSatisfy { $0.details["scope"] == "global" && $0.account == Person.jo.username })
        let checkpoints = try store.readTransaction { tx in
            try tx.auditLog.checkpoints().map(\.sequence)
        }
        for event in events {
            #expect(checkpoints.contains(event.sequence), "round \(round): no checkpoint at sign-out \(event.sequence)")
        }
        let report = try store.verify()
        #expect(report.isIntact, "round \(round): \(report)")
    }

    var description: String {
        "\(kind.rawValue): current \(current?.username ?? "nobody"), status \(status.map { $0.signedIn ? "signed in" : "signed out" } ?? "none"), "
            + "items \(items.sorted { $0.key < $1.key }), access tokens \(accessTokens.sorted { $0.key < $1.key }), "
            + "fill scopes \(fillScopes.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.count)" }), "
            + "lookups \(lookups.found)/\(lookups.total), sign-in tokens \(signInTokens.scanner ?? "-")/\(signInTokens.timeclock ?? "-")"
    }
}

// MARK: - The account-worker process

extension ChildProcess {
    /// Waits for a normal exit with status 0 (within a minute), recording an issue otherwise.
    fileprivate func expectSuccess(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let exited = await waitForExit(timeout: 60)
        try #require(exited, "\(what) did not finish within 60 s", sourceLocation: sourceLocation)
        try #require(
            exitedNormally && status == 0,
            "\(what): \(reasonDescription) \(status); stderr: \(standardError)",
            sourceLocation: sourceLocation
        )
    }
}
