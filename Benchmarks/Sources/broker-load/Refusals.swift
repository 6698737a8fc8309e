import BrokerContract
import DeviceBroker
import Foundation
import KeychainStore
import SharedDevice
import Varlink

// What a refusal costs beside the allowed call, through deviced and in-process, and whether it writes an audit
// record (the broker writes a refusal's first of a kind at once and only counts the same again for 60 s:
// DeviceBroker's RefusalAudit).

/// The first call timed alone (µs), then `count` more into `samples`, after a warm-up of 200; `call` says
/// whether the broker answered as expected.
private func series(_ samples: inout Samples, count: Int, first: inout Double, _ call: () -> Bool) {
    let start = now()
    guard call() else { fail("\(samples.label): unexpected reply") }
    first = Double(now() - start) / 1000
    for _ in 0..<min(200, count) { _ = call() }
    for _ in 0..<count {
        let ok = samples.time(call)
        guard ok else { fail("\(samples.label): unexpected reply") }
    }
}

/// The reply to `call` on `connection`; a broken connection ends the benchmark.
private func ask(_ connection: VarlinkConnection, _ call: VarlinkCall) -> VarlinkReply {
    do { return try connection.call(call) } catch { fail("refusals: \(error)") }
}

/// `refusals SOCKET N keychain` (as an app's uid): FindGenericPassword of an item in the app's own group
/// (allowed) and the same in the other app's group (refused: missing entitlement, -34018), GetCurrentAccount
/// (allowed), each N times on one connection; `refusals SOCKET N unlisted` (as a uid the policy does not list):
/// GetCurrentAccount N times (refused: CallerNotInPolicy). Prints `refusal-… p50 X p99 Y first F` (µs; the
/// first call, which may write the audit record, timed alone), and for the refused ones `error E calls C` (the
/// refusals made, warm-up and first included).
func refusals(socket: String, count: Int, kind: String) {
    do {
        let connection = try VarlinkConnection(unixSocketPath: socket)
        let current = VarlinkCall(Broker1.GetCurrentAccount.self, .init())
        switch kind {
        case "keychain":
            let service = "bench-refusal"
            let add = VarlinkCall(
                Broker1.AddGenericPassword.self,
                .init(service: service, account: "bench", secret: Data("bench-secret".utf8).base64EncodedString())
            )
            _ = ask(connection, add)  // a duplicate from an earlier run is refused: the item is there either way
            let own = VarlinkCall(Broker1.FindGenericPassword.self, .init(service: service, account: "bench"))
            let foreign = VarlinkCall(
                Broker1.FindGenericPassword.self,
                .init(service: service, account: "bench", accessGroup: "com.contoso.kiosk.timeclock")
            )
            var refusedError = ""
            var allowed = Samples("refusal-keychain-allowed", capacity: count)
            var refused = Samples("refusal-keychain-refused", capacity: count)
            var currentAllowed = Samples("refusal-current-allowed", capacity: count)
            var firstRefused = 0.0
            var firstAllowed = 0.0
            var firstCurrent = 0.0
            series(&refused, count: count, first: &firstRefused) {
                let reply = ask(connection, foreign)
                if case .int(let status)? = reply.parameters["status"] {
                    refusedError = "\(reply.error ?? "")/\(status)"
                }
                return reply.error != nil
            }
            series(&allowed, count: count, first: &firstAllowed) { ask(connection, own).error == nil }
            series(&currentAllowed, count: count, first: &firstCurrent) {
                ask(connection, current).error == nil
            }
            allowed.print(String(format: "first %.1f", firstAllowed))
            refused.print(
                String(format: "first %.1f error %@ calls %d", firstRefused, refusedError, 1 + min(200, count) + count)
            )
            currentAllowed.print(String(format: "first %.1f", firstCurrent))
        case "unlisted":
            var refused = Samples("refusal-unlisted-refused", capacity: count)
            var first = 0.0
            var refusedError = ""
            series(&refused, count: count, first: &first) {
                let reply = ask(connection, current)
                refusedError = reply.error ?? ""
                return reply.error != nil
            }
            refused.print(
                String(format: "first %.1f error %@ calls %d", first, refusedError, 1 + min(200, count) + count)
            )
        default:
            fail("refusals: unknown kind \(kind) (keychain, unlisted)")
        }
    } catch {
        fail("refusals: \(error)")
    }
}

/// `direct-refusals STATE_DIR N` (root): the broker's service logic alone (no socket), GetCurrentAccount as the
/// scanner's uid (allowed), as one uid the policy does not list again and again (refused, counted: one audit
/// record per 60 s), and as a new unlisted uid each time (refused, its audit record written at once; at most 500,
/// below the kinds RefusalAudit tracks), in that order. Prints `direct-refusal-… p50 X p99 Y records R` with the
/// audit records each series wrote.
func directRefusals(stateDirectory: String, count: Int) async {
    do {
        let device = ManagedDevice(store: try KeychainStore(directory: URL(fileURLWithPath: stateDirectory)))
        let broker = Broker(device: device)
        let call = VarlinkCall(method: Broker1.GetCurrentAccount.qualifiedName)
        func timed(_ uid: UInt32, refused: Bool) async -> UInt64 {
            let caller = BrokerCaller(uid: uid, gid: uid, pid: 1, connectionID: 1)
            let answer = Failure()
            let start = now()
            await broker.handle(call, caller: caller) { reply in
                if reply.error != nil { answer.set() }
                return true
            }
            let elapsed = now() - start
            if answer.isSet != refused { fail("direct-refusals: uid \(uid) \(refused ? "was served" : "was refused")") }
            return elapsed
        }
        var allowed = Samples("direct-refusal-allowed", capacity: count)
        var counted = Samples("direct-refusal-counted", capacity: count)
        var audited = Samples("direct-refusal-audited", capacity: count)
        for _ in 0..<min(200, count) {
            _ = await timed(1001, refused: false)
            _ = await timed(65534, refused: true)
        }
        // In blocks, the audited one last: each audit record changes the store, and the broker then reads the
        // policy again on its next call.
        var records = (allowed: Int64(0), counted: Int64(0), audited: Int64(0))
        var before = try device.lastAuditSequence()
        for _ in 0..<count { allowed.append(await timed(1001, refused: false)) }
        var after = try device.lastAuditSequence()
        records.allowed = after - before
        before = after
        for _ in 0..<count { counted.append(await timed(65534, refused: true)) }
        after = try device.lastAuditSequence()
        records.counted = after - before
        before = after
        for index in 0..<min(count, 500) { audited.append(await timed(200_000 + UInt32(index), refused: true)) }
        after = try device.lastAuditSequence()
        records.audited = after - before
        allowed.print("records \(records.allowed)")
        counted.print("records \(records.counted)")
        audited.print("records \(records.audited)")
    } catch {
        fail("direct-refusals: \(error)")
    }
}

/// `audit-sequence STATE_DIR` (root): the audit log's last sequence number.
func auditSequence(stateDirectory: String) {
    do {
        let device = ManagedDevice(store: try KeychainStore(directory: URL(fileURLWithPath: stateDirectory)))
        say("audit-sequence \(try device.lastAuditSequence())")
    } catch {
        fail("audit-sequence: \(error)")
    }
}
