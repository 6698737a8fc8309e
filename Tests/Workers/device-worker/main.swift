// device-worker: a test helper process that changes a device's mode over and over, for the SIGKILL
// atomicity tests in Tests/DevicectlTests/ProvisioningKillTests.swift.
//
//   device-worker --dir D --shared FILE --private FILE [--items N]
//
// Opens (creating if needed) the store in D and prints `ready <mode> <fill>` with what it found
// (`<mode>`: shared, private or none; `<fill>`: full or empty). Then loops forever:
//
//   - not provisioned: provisions the shared policy (`provisioned shared`);
//   - no app group exists: fills every access group of the current policy with N items (default 100,
//     service "fill", accounts item-0 … item-<N-1>, 0.5–1.5 KB secrets, `DeviceWorkerFixture.fillSecret`) in ONE store
//     transaction (`filled <mode> <items>`), so a mode change always has hundreds of items to shred;
//   - filled: applies the other policy with force (`ManagedDevice.provision(policyDocument:force: true, …)`),
//     which crypto-shreds every app group (`switched <mode>`).
//
// Every line is printed after its step committed, with one write(2) (`WorkerOutput`), so whatever
// was printed before the process died describes committed state; at most the one step that was
// committing when the process was killed can be committed without its line. Any unexpected error prints
// `error: <message>` to standard error and exits 1. Meant to be killed with SIGKILL.

import Foundation
import KeychainStore
import ProcessTestSupport
import SharedDevice

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Output, arguments and fill secrets (shared with the tests through ProcessTestSupport)

func say(_ line: String) { WorkerOutput.say(line) }

func fail(_ message: String) -> Never { WorkerOutput.fail(message) }

func policyDocument(_ path: String) -> (document: Data, policy: DevicePolicy) {
    guard let document = FileManager.default.contents(atPath: path) else { fail("cannot read policy file \(path)") }
    do {
        return (document, try DevicePolicy.decode(document))
    } catch {
        fail("invalid policy \(path): \(error)")
    }
}

// MARK: - Steps

/// The app groups present (every group but the device's reserved ones).
func appGroups(_ store: KeychainStore) throws -> [String] {
    try store.readTransaction { tx in try tx.accessGroupNames().filter { !AccessGroup.isReserved($0) } }
}

/// Fills every group of `policy` with `itemsPerGroup` items in one transaction; returns the item count,
/// or 0 if app groups already exist (a fill committed before the previous process was killed).
func fill(_ store: KeychainStore, policy: DevicePolicy, itemsPerGroup: Int) throws -> Int {
    try store.writeTransaction { tx -> Int in
        guard try tx.accessGroupNames().allSatisfy(AccessGroup.isReserved) else { return 0 }
        var added = 0
        var seen: Set<String> = []
        for app in policy.apps {
            let identity = try AppIdentity(appID: app.id, accessGroups: app.accessGroups)
            for group in app.accessGroups where seen.insert(group).inserted {
                for index in 0..<itemsPerGroup {
                    try tx.add(
                        NewItem(
                            accessGroup: group,
                            service: "fill",
                            account: "item-\(index)",
                            secret: DeviceWorkerFixture.fillSecret(group: group, index: index),
                            label: "fill \(index)"
                        ),
                        as: identity
                    )
                    added += 1
                }
            }
        }
        return added
    }
}

// MARK: - main

signal(SIGPIPE, SIG_IGN)
let arguments = WorkerArguments(
    CommandLine.arguments,
    hasMode: false,
    usage: "device-worker --dir D --shared FILE --private FILE [--items N]"
)
let directory = URL(fileURLWithPath: arguments.string("dir"), isDirectory: true)
let itemsPerGroup = arguments.int("items", default: 100)
guard itemsPerGroup > 0 else { fail("invalid-arguments --items must be a positive integer") }
let policies: [DevicePolicy.Mode: (document: Data, policy: DevicePolicy)] = [
    .shared: policyDocument(arguments.string("shared")),
    .private: policyDocument(arguments.string("private")),
]
for (mode, entry) in policies where entry.policy.device.mode != mode {
    fail("invalid-arguments the --\(mode.rawValue) policy is a \(entry.policy.device.mode.rawValue)-mode policy")
}
let store: KeychainStore
do {
    store = try KeychainStore(directory: directory)
} catch {
    fail("open \(directory.path): \(error)")
}
let device = ManagedDevice(store: store)
let actor = "device-worker (pid \(getpid()))"

do {
    let record = try device.record()
    let groups = try appGroups(store)
    let filled = !groups.isEmpty
    say("ready \(record?.mode.rawValue ?? "none") \(filled ? "full" : "empty")")
} catch {
    fail("reading the initial state: \(error)")
}

while true {
    do {
        guard let record = try device.record() else {
            let (outcome, record) = try device.provision(
                policyDocument: policies[.shared]!.document,
                force: true,
                actor: actor
            )
            guard outcome == .provisioned, record.mode == .shared else {
                fail("provisioning an unprovisioned device gave \(outcome.rawValue) \(record.mode.rawValue)")
            }
            say("provisioned shared")
            continue
        }
        guard let current = policies[record.mode], current.policy.device.mode == record.mode else {
            fail("the device is in mode \(record.mode.rawValue) with no policy for it")
        }
        if try appGroups(store).isEmpty {
            let added = try fill(store, policy: current.policy, itemsPerGroup: itemsPerGroup)
            guard added > 0 else { fail("the fill found app groups that were not there a moment ago") }
            say("filled \(record.mode.rawValue) \(added)")
            continue
        }
        let target: DevicePolicy.Mode = record.mode == .shared ? .private : .shared
        let (outcome, changed) = try device.provision(
            policyDocument: policies[target]!.document,
            force: true,
            actor: actor
        )
        guard outcome == .modeChanged, changed.mode == target else {
            fail("the forced change to \(target.rawValue) gave \(outcome.rawValue) \(changed.mode.rawValue)")
        }
        guard try appGroups(store).isEmpty else { fail("app groups survived the mode change to \(target.rawValue)") }
        say("switched \(target.rawValue)")
    } catch {
        fail("\(error)")
    }
}
