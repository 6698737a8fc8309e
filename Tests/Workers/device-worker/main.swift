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
//     service "fill", accounts item-0 … item-<N-1>, 0.5–1.5 KB secrets, see `fillSecret`) in ONE store
//     transaction (`filled <mode> <items>`), so a mode change always has hundreds of items to shred;
//   - filled: applies the other policy with force (`ManagedDevice.provision(policyDocument:force: true, …)`),
//     which crypto-shreds every app group (`switched <mode>`).
//
// Every line is printed after its step committed, with one write(2) (no stdio buffering), so whatever
// was printed before the process died describes committed state; at most the one step that was
// committing when the process was killed can be committed without its line. Any unexpected error prints
// `error: <message>` to standard error and exits 1. Meant to be killed with SIGKILL.

import Foundation
import KeychainStore
import SharedDevice

#if canImport(Glibc)
import Glibc
#endif

// MARK: - Output

func say(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    // One write(2); if the reader is gone there is nobody to report to.
    guard bytes.withUnsafeBytes({ write(STDOUT_FILENO, $0.baseAddress, $0.count) }) == bytes.count else { exit(1) }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    exit(1)
}

// MARK: - Deterministic secrets (the test has the same function)

/// The secret of fill item `index` in `group`: the text `<group>/item-<index>;` repeated to 512–1535 bytes.
func fillSecret(group: String, index: Int) -> Data {
    let unit = "\(group)/item-\(index);"
    let length = 512 + (index &* 37) % 1024
    let text = String(repeating: unit, count: length / unit.utf8.count + 1)
    return Data(text.utf8.prefix(length))
}

// MARK: - Arguments

func parseArguments(_ raw: [String]) -> [String: String] {
    var values: [String: String] = [:]
    var index = 1
    while index < raw.count {
        let name = raw[index]
        guard name.hasPrefix("--"), index + 1 < raw.count else {
            fail("invalid-arguments unexpected argument \(name); usage: device-worker --dir D --shared FILE --private FILE [--items N]")
        }
        values[String(name.dropFirst(2))] = raw[index + 1]
        index += 2
    }
    return values
}

func required(_ name: String, in values: [String: String]) -> String {
    guard let value = values[name] else { fail("invalid-arguments missing --\(name)") }
    return value
}

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
                    try tx.add(NewItem(accessGroup: group, service: "fill", account: "item-\(index)",
                                       secret: fillSecret(group: group, index: index), label: "fill \(index)"),
                               as: identity)
                    added += 1
                }
            }
        }
        return added
    }
}

// MARK: - main

signal(SIGPIPE, SIG_IGN)
let values = parseArguments(CommandLine.arguments)
let directory = URL(fileURLWithPath: required("dir", in: values), isDirectory: true)
let itemsPerGroup: Int = {
    guard let text = values["items"] else { return 100 }
    guard let count = Int(text), count > 0 else { fail("invalid-arguments --items must be a positive integer") }
    return count
}()
let policies: [DevicePolicy.Mode: (document: Data, policy: DevicePolicy)] = [
    .shared: policyDocument(required("shared", in: values)),
    .private: policyDocument(required("private", in: values)),
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
            let (outcome, record) = try device.provision(policyDocument: policies[.shared]!.document, force: true, actor: actor)
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
        let (outcome, changed) = try device.provision(policyDocument: policies[target]!.document, force: true, actor: actor)
        guard outcome == .modeChanged, changed.mode == target else {
            fail("the forced change to \(target.rawValue) gave \(outcome.rawValue) \(changed.mode.rawValue)")
        }
        guard try appGroups(store).isEmpty else { fail("app groups survived the mode change to \(target.rawValue)") }
        say("switched \(target.rawValue)")
    } catch {
        fail("\(error)")
    }
}
