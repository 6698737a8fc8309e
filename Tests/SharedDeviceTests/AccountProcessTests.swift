import Foundation
import GRDB
import KeychainStore
import SharedDevice
import Synchronization
import ProcessTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Real processes on one device (Sources/account-worker): a process waiting on `AccountManager.changes()`
/// learns of another process's global sign-out, and a sign-out of hundreds of tokens killed with SIGKILL
/// at random points is never half done. Every time bound is a generous safety net against a hung child,
/// not a performance assertion.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct AccountProcessTests {
    static let kioskPolicy = Policies.directory.appendingPathComponent("kiosk.json").path

    // MARK: - Cross-process account changes

    @Test func aGlobalSignOutInOneProcessReachesAProcessWaitingForChanges() async throws {
        let directory = TemporaryStateDirectory("account-events")
        let fill = try ChildProcess(product: "account-worker", ["fill", directory.url.path, "20", "--policy", Self.kioskPolicy])
        try await fill.expectSuccess("fill")
        #expect(fill.lines(prefix: "filled") == ["filled 20"])

        // B: the timeclock, waiting. Its fallback re-check is 600 s, so only the change signal can wake it
        // within the bounds below.
        let waiter = try ChildProcess(product: "account-worker", ["wait", directory.url.path, KioskApps.timeclockID, "--fallback", "600"])
        defer { waiter.killIfRunning() }
        let ready = await waiter.waitForLines(atLeast: 1, prefix: "ready", timeout: 60)
        try #require(ready, "the waiting process never got ready; stderr: \(waiter.standardError)")
        let initial = try #require(waiter.lines(prefix: "initial ").first)
        let initialView = try Self.currentAccountJSON(String(initial.dropFirst("initial ".count)))
        #expect(initialView.current?["homeAccountId"] as? String == Person.jo.homeAccountID)

        // A: the scanner ends the shift.
        let started = Date()
        let signer = try ChildProcess(product: "account-worker", ["signout", directory.url.path, KioskApps.scannerID, "--reason", "shift-end"])
        try await signer.expectSuccess("signout")
        #expect(signer.lines(prefix: "signed-out") == ["signed-out 68"])  // 3 × 20 fill tokens + 2 × 4 sign-in items

        let exited = await waiter.waitForExit(timeout: 60)
        try #require(exited, "the waiting process did not receive the sign-out within 60 s; stdout: \(waiter.standardOutput) stderr: \(waiter.standardError)")
        #expect(Date().timeIntervalSince(started) < 60)
        #expect(waiter.exitedNormally && waiter.status == 0, "\(waiter.reasonDescription) \(waiter.status): \(waiter.standardError)")
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

    // MARK: - SIGKILL during sign-out

    /// Tokens per group: three groups of 200 plus the sign-in items, so one sign-out removes 608 items.
    static let tokensPerGroup = 200
    /// Roughly how long the worker takes from its start to the sign-out call.
    static let startupMilliseconds = 15

    @Test func aSignOutKilledWithSIGKILLIsNeverPartial() async throws {
        let directory = TemporaryStateDirectory("account-sigkill")
        let n = Self.tokensPerGroup
        var rounds = 0, inFlight = 0, completed = 0, beforeStart = 0
        var expectedSignOuts = 0
        var state = KioskState.Kind.signedOut
        // At least 12 rounds; more (up to 40) until at least 4 kills landed inside the sign-out call.
        while rounds < 12 || (inFlight < 4 && rounds < 40) {
            if state != .fullySignedIn {
                let fill = try ChildProcess(product: "account-worker", ["fill", directory.url.path, "\(n)", "--policy", Self.kioskPolicy])
                try await fill.expectSuccess("round \(rounds): fill")
            }
            // The kill comes 20–300 ms after the start. A cold process takes ~15 ms to open the store and the
            // sign-out ~20 ms (debug build), so the worker waits first: its sign-out then starts a little
            // before the kill, and the kill falls somewhere inside it (or just before or after).
            let killAfter = Int.random(in: 20...300)
            let startAfter = max(0, killAfter - Self.startupMilliseconds - Int.random(in: -5...30))
            let app = rounds % 2 == 0 ? KioskApps.scannerID : KioskApps.timeclockID
            let worker = try ChildProcess(product: "account-worker", ["signout", directory.url.path, app, "--reason", "shift-end", "--after", "\(startAfter)"])
            defer { worker.killIfRunning() }
            try await Task.sleep(for: .milliseconds(killAfter))
            worker.killIfRunning()
            let exited = await worker.waitForExit(timeout: 60)
            try #require(exited, "round \(rounds): the sign-out process did not end")

            let started = !worker.lines(prefix: "signing-out").isEmpty
            let acknowledged = !worker.lines(prefix: "signed-out").isEmpty
            if worker.killedBySignal == SIGKILL {
                #expect(worker.standardError.isEmpty, "round \(rounds): \(worker.standardError)")
                if !started { beforeStart += 1 } else if !acknowledged { inFlight += 1 }
            } else {
                #expect(worker.exitedNormally && worker.status == 0 && acknowledged,
                        "round \(rounds): \(worker.reasonDescription) \(worker.status): \(worker.standardError)")
                completed += 1
            }

            // Reopen (recovering whatever the killed process left in the WAL) and look.
            let observed = try KioskState(directory: directory, tokensPerGroup: n)
            state = observed.kind
            #expect(state == .fullySignedIn || state == .signedOut, "round \(rounds): partial state after a SIGKILL: \(observed)")
            if acknowledged { #expect(state == .signedOut, "round \(rounds): an acknowledged sign-out is not durable: \(observed)") }
            if !started { #expect(state == .fullySignedIn, "round \(rounds): signed out before the sign-out began: \(observed)") }
            if state == .signedOut { expectedSignOuts += 1 }
            try observed.expectAuditAndStoreIntact(signOuts: expectedSignOuts, round: rounds)
            rounds += 1
        }
        // How the kills fell (before the call, inside it, after it finished) is random; inside it must happen.
        #expect(inFlight >= 1, "no kill landed inside a sign-out in \(rounds) rounds (\(beforeStart) before, \(completed) after)")
        withExtendedLifetime(directory) {}
    }

    /// The brief's `signout-loop`: sign-in, single sign-on, fill and sign-out over and over, killed at a random
    /// point of any of them. Each is its own transaction, so the state found is always one of the steps'
    /// results: signed out, signed in before the fill (one or both apps), or fully signed in.
    @Test func aSignInAndSignOutLoopKilledAnywhereLeavesOnlyWholeSteps() async throws {
        let directory = TemporaryStateDirectory("account-sigkill-loop")
        let n = 100
        var expectedSignOuts = 0
        var previous = KioskState.Kind.signedOut
        var kinds: [KioskState.Kind] = []
        // Provisioned up front (the worker's own provisioning is then a no-op): a kill in round 0 before
        // the worker got that far must still leave a device to inspect.
        _ = try ManagedDevice(store: openStore(directory)).provision(policyDocument: Policies.kiosk(), actor: "test")
        for round in 0..<10 {
            let worker = try ChildProcess(product: "account-worker", ["signout-loop", directory.url.path, "\(n)", "--policy", Self.kioskPolicy])
            defer { worker.killIfRunning() }
            try await Task.sleep(for: .milliseconds(Int.random(in: 20...700)))
            let wasRunning = worker.killIfRunning()
            let exited = await worker.waitForExit(timeout: 60)
            try #require(exited, "round \(round): the loop did not end")
            #expect(wasRunning && worker.killedBySignal == SIGKILL, "round \(round): \(worker.reasonDescription): \(worker.standardError)")
            #expect(worker.standardError.isEmpty, "round \(round): \(worker.standardError)")

            let observed = try KioskState(directory: directory, tokensPerGroup: n)
            kinds.append(observed.kind)
            #expect(observed.kind != .partial, "round \(round): partial state after a SIGKILL: \(observed)")
            let lines = worker.lines(prefix: "")
            let acknowledged = lines.filter { $0.hasPrefix("signed-out ") }.count
            let inFlight = lines.last == "signing-out"
            let committed = try observed.signOutEvents() - expectedSignOuts
            #expect(committed == acknowledged || (inFlight && committed == acknowledged + 1),
                    "round \(round): \(committed) sign-outs committed, \(acknowledged) acknowledged, last line \(lines.last ?? "-")")
            if lines.isEmpty {
                #expect(observed.kind == previous, "round \(round): killed before it began, yet \(observed)")
            } else if lines.last?.hasPrefix("signed-out ") == true {
                #expect(observed.kind == .signedOut, "round \(round): \(observed) after an acknowledged sign-out")
            } else if lines.last == "filled" {
                #expect(observed.kind == .fullySignedIn, "round \(round): \(observed) after an acknowledged fill")
            }
            expectedSignOuts += committed
            previous = observed.kind
            try observed.expectAuditAndStoreIntact(signOuts: expectedSignOuts, round: round)
        }
        #expect(expectedSignOuts > 0, "no sign-out committed in 10 rounds: \(kinds)")
        withExtendedLifetime(directory) {}
    }

    // MARK: - Helpers

    static func currentAccountJSON(_ text: String) throws -> (current: [String: Any]?, previous: [String: Any]?) {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not JSON: \(text)")
        #expect(object.keys.sorted() == ["current", "previous"])
        return (object["current"] as? [String: Any], object["previous"] as? [String: Any])
    }
}

// MARK: - What a store holds of the account-worker's worker

/// The kiosk as found after a worker process ended: who is current and which of Jo's credentials each
/// group holds, counted as items and looked up through the token cache with each app's identity.
struct KioskState: CustomStringConvertible {
    enum Kind: String {
        /// Jo is current with every token: the sign-in items and all fill tokens in every group.
        case fullySignedIn = "fully signed in"
        /// Jo is current after the scanner's sign-in only (shared group), or also the timeclock's single sign-on.
        case signedInBeforeFill = "signed in, not filled yet"
        /// Nobody current and not one of Jo's credentials anywhere.
        case signedOut = "signed out"
        case partial
    }

    let store: KeychainStore
    let device: ManagedDevice
    let current: DeviceAccount?
    let status: AccountStatus?
    /// Jo's items per group, and the access tokens among them.
    let items: [String: Int]
    let accessTokens: [String: Int]
    /// How many of the sampled fill tokens each app found through the token cache, of how many looked up.
    let lookups: (found: Int, total: Int)
    let kind: Kind

    init(directory: TemporaryStateDirectory, tokensPerGroup n: Int) throws {
        store = try openStore(directory)
        device = ManagedDevice(store: store)
        let accounts = AccountManager(device: device)
        let scanner = try #require(try device.appIdentity(KioskApps.scannerID, actor: "test"))
        let timeclock = try #require(try device.appIdentity(KioskApps.timeclockID, actor: "test"))
        let groups = [AccessGroup.adalCache, KioskApps.scannerGroup, KioskApps.timeclockGroup]
        let inspector = try AppIdentity(appID: "test.inspector", accessGroups: groups)
        var items: [String: Int] = [:], accessTokens: [String: Int] = [:]
        for group in groups {
            let found = try store.metadata(matching: ItemQuery(accessGroup: group, account: Person.jo.cacheAccount), as: inspector)
            items[group] = found.count
            accessTokens[group] = found.filter { $0.type == KeychainItemType.accessToken }.count
        }
        self.items = items
        self.accessTokens = accessTokens
        current = try accounts.currentAccount(for: scanner).current
        status = try accounts.accounts().first { $0.account.homeAccountID == Person.jo.homeAccountID }

        var found = 0, total = 0
        for app in [scanner, timeclock] {
            for group in app.accessGroups {
                for index in [0, n / 2, n - 1] {
                    total += 1
                    let token = try accounts.tokenCache.accessToken(
                        homeAccountID: Person.jo.homeAccountID, environment: KioskAuthority.environment, clientID: KioskAuthority.clientID,
                        realm: KioskAuthority.tenant, scopes: ["api://kiosk/resource-\(index).read"], as: app, accessGroup: group, in: store)
                    if token != nil { found += 1 }
                }
            }
        }
        lookups = (found, total)

        let full = [AccessGroup.adalCache: n + 4, KioskApps.scannerGroup: n, KioskApps.timeclockGroup: n + 4]
        let fullTokens = [AccessGroup.adalCache: n + 1, KioskApps.scannerGroup: n, KioskApps.timeclockGroup: n + 1]
        let scannerOnly = [AccessGroup.adalCache: 4, KioskApps.scannerGroup: 0, KioskApps.timeclockGroup: 0]
        let bothApps = [AccessGroup.adalCache: 4, KioskApps.scannerGroup: 0, KioskApps.timeclockGroup: 4]
        let empty = [AccessGroup.adalCache: 0, KioskApps.scannerGroup: 0, KioskApps.timeclockGroup: 0]
        let joCurrent = current == Person.jo.account && status?.signedIn == true
        if joCurrent && items == full && accessTokens == fullTokens && found == total {
            kind = .fullySignedIn
        } else if joCurrent && (items == scannerOnly || items == bothApps) && found == 0 {
            kind = .signedInBeforeFill
        } else if current == nil && status?.signedIn != true && items == empty && found == 0 {
            kind = .signedOut
        } else {
            kind = .partial
        }
    }

    /// Account sign-out events in the log.
    func signOutEvents() throws -> Int {
        try device.auditEvents(matching: AuditFilter(types: [.accountSignedOut])).count
    }

    /// The audit log verifies, holds `signOuts` sign-outs each with a checkpoint, and the store's items authenticate.
    func expectAuditAndStoreIntact(signOuts: Int, round: Int) throws {
        let verification = try device.verifyAudit()
        #expect(verification.isIntact, "round \(round): \(verification.problems)")
        let events = try device.auditEvents(matching: AuditFilter(types: [.accountSignedOut]))
        #expect(events.count == signOuts, "round \(round): \(events.count) sign-out events, expected \(signOuts)")
        #expect(events.allSatisfy { $0.details["scope"] == "global" && $0.account == Person.jo.username })
        let checkpoints = try store.readTransaction { tx in
            try Int64.fetchAll(tx.database, sql: "SELECT sequence FROM audit_checkpoints")
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
            + "lookups \(lookups.found)/\(lookups.total)"
    }
}

// MARK: - The account-worker process

private extension ChildProcess {
    /// Waits for a normal exit with status 0 (within a minute), recording an issue otherwise.
    func expectSuccess(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let exited = await waitForExit(timeout: 60)
        try #require(exited, "\(what) did not finish within 60 s", sourceLocation: sourceLocation)
        try #require(exitedNormally && status == 0, "\(what): \(reasonDescription) \(status); stderr: \(standardError)",
                     sourceLocation: sourceLocation)
    }
}
