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
// Each output line is written with one write(2) (`WorkerOutput`), so whatever was printed before the
// process died is in the pipe. Any unexpected error prints `error: <code> <message>` to stderr and exits 1.
// The secrets are deterministic (`KeychainWorkerFixture`, shared with the test) so the test can check every byte.

import Foundation
import KeychainStore
import ProcessTestSupport

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Output, arguments and secrets (shared with the tests through ProcessTestSupport)

func say(_ line: String) { WorkerOutput.say(line) }

func fail(_ message: String) -> Never { WorkerOutput.fail(message) }

func fail(_ error: KeychainError, _ context: String) -> Never {
    fail("\(error.code) \(error.message) [\(context)]")
}

func mixedSecret(worker: Int, index: Int) -> Data { KeychainWorkerFixture.mixedSecret(worker: worker, index: index) }
func writerSecret(index: Int) -> Data { KeychainWorkerFixture.writerSecret(index: index) }
func itemIndex(_ account: String) -> Int? { KeychainWorkerFixture.itemIndex(account) }

typealias Arguments = WorkerArguments

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
    var live: [Int] = []  // added and not deleted, in no particular order
    var deleted: [Int] = []
    let deadline = Date().addingTimeInterval(seconds)

    func checkOwn(_ index: Int, expectPresent: Bool) {
        let account = "item-\(index)"
        do {
            let item = try store.find(ItemQuery(service: service, account: account), as: app)
            guard expectPresent else { fail("unexpected-item deleted item \(service)/\(account) was found again") }
            guard item.service == service, item.account == account,
                item.secret == mixedSecret(worker: worker, index: index)
            else {
                fail("wrong-item \(service)/\(account) came back with other attributes or another secret")
            }
        } catch let error where error.code == .itemNotFound {
            if expectPresent {
                fail("lost-item \(service)/\(account) was acknowledged but is not found: \(error.message)")
            }
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
                try store.add(
                    NewItem(service: service, account: account, secret: mixedSecret(worker: worker, index: index)),
                    as: app
                )
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
                        item.secret == mixedSecret(worker: other, index: index)
                    else {
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
            try store.add(
                NewItem(service: "writer", account: "item-\(index)", secret: writerSecret(index: index)),
                as: app
            )
        } catch {
            fail(error, "add writer/item-\(index)")
        }
        say("ack \(index)")
        index += 1
    }
}

// MARK: - main

signal(SIGPIPE, SIG_IGN)
let arguments = Arguments(CommandLine.arguments, hasMode: true, usage: "keychain-worker mixed|writer --dir D [options]")
switch arguments.mode ?? "" {
case "mixed":
    runMixed(arguments)
    exit(0)
case "writer": runWriter(arguments)
default: fail("invalid-arguments unknown mode \(arguments.mode ?? "-"); use mixed or writer")
}
