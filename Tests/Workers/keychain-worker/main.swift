// keychain-worker: a test helper process that hammers one keychain store, for the multi-process and
// SIGKILL tests in Tests/KeychainStoreTests/MultiProcessTests.swift.
//
//   keychain-worker mixed  --dir D --worker N [--workers M] [--seconds S]
//       Adds unique items (service "w<N>", account "item-<i>"), reads back its own earlier items,
//       deletes some of them and reads other workers' items, for S seconds. Prints `added <account>`
//       and `deleted <account>` after each acknowledged add/delete, then `done`.
//   keychain-worker writer --dir D [--start K]
//       Adds ("writer", "item-<i>") for i = K, K+1, ... forever, printing `ack <i>` after each add
//       returns. Meant to be killed with SIGKILL.
//
// Each output line is written with one write(2) (no stdio buffering), so whatever was printed before
// the process died is in the pipe. Any unexpected error prints `error: <code> <message>` to stderr and
// exits 1. The secrets are deterministic (see `secretBytes`) so the test can check every byte.

import Foundation
import KeychainStore

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Output

func writeLine(_ line: String, to handle: FileHandle) {
    handle.write(Data((line + "\n").utf8))
}

func say(_ line: String) { writeLine(line, to: FileHandle.standardOutput) }

func fail(_ message: String) -> Never {
    writeLine("error: \(message)", to: FileHandle.standardError)
    exit(1)
}

func fail(_ error: KeychainError, _ context: String) -> Never {
    fail("\(error.code) \(error.message) [\(context)]")
}

// MARK: - Deterministic secrets (the test has the same function)

/// `length` pseudo-random bytes from a splitmix64 stream seeded by `tag` and `index`.
func secretBytes(tag: UInt64, index: Int, length: Int) -> Data {
    var state = tag &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(truncatingIfNeeded: index) &* 0xD1B5_4A32_D192_ED03
    var bytes = [UInt8]()
    bytes.reserveCapacity(length + 8)
    while bytes.count < length {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        withUnsafeBytes(of: z.littleEndian) { bytes.append(contentsOf: $0) }
    }
    return Data(bytes.prefix(length))
}

/// The secret of item `index` of mixed worker `worker`: 16–271 bytes.
func mixedSecret(worker: Int, index: Int) -> Data {
    secretBytes(tag: UInt64(worker) + 1, index: index, length: 16 + index % 256)
}

/// The secret of writer item `index`: 1–4 KB, so commits take a little time.
func writerSecret(index: Int) -> Data {
    secretBytes(tag: 0xC0FFEE, index: index, length: 1024 + (index &* 7919) % 3072)
}

// MARK: - Arguments

struct Arguments {
    var mode: String
    var values: [String: String]

    init(_ raw: [String]) {
        guard raw.count >= 2 else { fail("invalid-arguments usage: keychain-worker mixed|writer --dir D [options]") }
        mode = raw[1]
        values = [:]
        var index = 2
        while index < raw.count {
            let name = raw[index]
            guard name.hasPrefix("--"), index + 1 < raw.count else { fail("invalid-arguments unexpected argument \(name)") }
            values[String(name.dropFirst(2))] = raw[index + 1]
            index += 2
        }
    }

    func string(_ name: String) -> String {
        guard let value = values[name] else { fail("invalid-arguments missing --\(name)") }
        return value
    }

    func int(_ name: String, default fallback: Int? = nil) -> Int {
        guard let text = values[name] else {
            guard let fallback else { fail("invalid-arguments missing --\(name)") }
            return fallback
        }
        guard let value = Int(text) else { fail("invalid-arguments --\(name) is not an integer: \(text)") }
        return value
    }

    func double(_ name: String, default fallback: Double) -> Double {
        guard let text = values[name] else { return fallback }
        guard let value = Double(text) else { fail("invalid-arguments --\(name) is not a number: \(text)") }
        return value
    }
}

func openStore(_ arguments: Arguments) -> KeychainStore {
    let directory = URL(fileURLWithPath: arguments.string("dir"), isDirectory: true)
    do {
        return try KeychainStore(directory: directory, options: StoreOptions(synchronous: .normal))
    } catch {
        fail(error, "open")
    }
}

/// Every worker uses the shared MSAL group, so the test (as any app entitled to it) sees all items.
func identity(_ appID: String) -> AppIdentity {
    do {
        return try AppIdentity(appID: appID, accessGroups: [AccessGroup.adalCache])
    } catch {
        fail(error, "identity")
    }
}

/// The `i` of an account named `item-<i>`.
func itemIndex(_ account: String) -> Int? {
    guard account.hasPrefix("item-") else { return nil }
    return Int(account.dropFirst(5))
}

// MARK: - mixed

/// Returns (rather than exiting) so the store is closed normally, checkpointing as the last user would.
func runMixed(_ arguments: Arguments) {
    let worker = arguments.int("worker")
    let workers = max(arguments.int("workers", default: 4), 1)
    let seconds = arguments.double("seconds", default: 5)
    let store = openStore(arguments)
    let app = identity("com.contoso.worker\(worker)")
    let service = "w\(worker)"
    var generator = SystemRandomNumberGenerator()

    var next = 0
    var live: [Int] = []           // added and not deleted, in no particular order
    var deleted: [Int] = []
    let deadline = Date().addingTimeInterval(seconds)

    func checkOwn(_ index: Int, expectPresent: Bool) {
        let account = "item-\(index)"
        do {
            let item = try store.find(ItemQuery(service: service, account: account), as: app)
            guard expectPresent else { fail("unexpected-item deleted item \(service)/\(account) was found again") }
            guard item.service == service, item.account == account, item.secret == mixedSecret(worker: worker, index: index) else {
                fail("wrong-item \(service)/\(account) came back with other attributes or another secret")
            }
        } catch let error where error.code == .itemNotFound {
            if expectPresent { fail("lost-item \(service)/\(account) was acknowledged but is not found: \(error.message)") }
        } catch {
            fail(error, "find \(service)/\(account)")
        }
    }

    while Date() < deadline {
        let roll = Int.random(in: 0..<100, using: &generator)
        switch roll {
        case 0..<55:
            let index = next
            next += 1
            let account = "item-\(index)"
            do {
                try store.add(NewItem(service: service, account: account, secret: mixedSecret(worker: worker, index: index)), as: app)
            } catch {
                fail(error, "add \(service)/\(account)")
            }
            live.append(index)
            say("added \(account)")
        case 55..<75:
            if let index = live.randomElement(using: &generator) { checkOwn(index, expectPresent: true) }
        case 75..<80:
            if let index = deleted.randomElement(using: &generator) { checkOwn(index, expectPresent: false) }
        case 80..<90:
            guard !live.isEmpty else { continue }
            let position = Int.random(in: 0..<live.count, using: &generator)
            let index = live[position]
            let account = "item-\(index)"
            do {
                let count = try store.delete(ItemQuery(service: service, account: account), as: app)
                guard count == 1 else { fail("wrong-count deleting \(service)/\(account) removed \(count) items") }
            } catch {
                fail(error, "delete \(service)/\(account)")
            }
            live.swapAt(position, live.count - 1)
            live.removeLast()
            deleted.append(index)
            say("deleted \(account)")
        case 90..<95:
            // Another worker's items: whatever is found must be intact and carry that worker's secret.
            guard workers > 1 else { continue }
            var other = Int.random(in: 0..<workers - 1, using: &generator)
            if other >= worker { other += 1 }
            let otherService = "w\(other)"
            do {
                let items = try store.findAll(ItemQuery(service: otherService), as: app)
                for item in items {
                    guard item.service == otherService, let index = itemIndex(item.account),
                          item.secret == mixedSecret(worker: other, index: index) else {
                        fail("wrong-item \(otherService)/\(item.account) has other attributes or another secret")
                    }
                }
            } catch let error where error.code == .itemNotFound {
                // That worker has not added anything yet, or deleted everything: fine.
            } catch {
                fail(error, "findAll \(otherService)")
            }
        default:
            // A lookup of one of the other worker's accounts that may or may not exist.
            guard workers > 1 else { continue }
            var other = Int.random(in: 0..<workers - 1, using: &generator)
            if other >= worker { other += 1 }
            let index = Int.random(in: 0..<max(next, 1), using: &generator)
            do {
                let item = try store.find(ItemQuery(service: "w\(other)", account: "item-\(index)"), as: app)
                guard item.secret == mixedSecret(worker: other, index: index) else {
                    fail("wrong-item w\(other)/item-\(index) carries another secret")
                }
            } catch let error where error.code == .itemNotFound {
            } catch {
                fail(error, "find w\(other)/item-\(index)")
            }
        }
    }

    // Final self-check: everything this worker believes is live is there, everything deleted is gone.
    for index in live { checkOwn(index, expectPresent: true) }
    for index in deleted { checkOwn(index, expectPresent: false) }
    say("done")
}

// MARK: - writer

func runWriter(_ arguments: Arguments) -> Never {
    let start = arguments.int("start", default: 0)
    let store = openStore(arguments)
    let app = identity("com.contoso.writer")
    var index = start
    while true {
        do {
            try store.add(NewItem(service: "writer", account: "item-\(index)", secret: writerSecret(index: index)), as: app)
        } catch {
            fail(error, "add writer/item-\(index)")
        }
        say("ack \(index)")
        index += 1
    }
}

// MARK: - main

signal(SIGPIPE, SIG_IGN)
let arguments = Arguments(CommandLine.arguments)
switch arguments.mode {
case "mixed":
    runMixed(arguments)
    exit(0)
case "writer": runWriter(arguments)
default: fail("invalid-arguments unknown mode \(arguments.mode); use mixed or writer")
}
