import ArgumentParser
import Foundation
import KeychainStore
import SharedDevice

struct Provision: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Provision the device from a policy file, or apply a changed policy (audited).",
        discussion: """
            Creates the state directory and store if needed and records the policy, its SHA-256, a device id and \
            the device's audit signing key in the device's own access group. The same policy again changes \
            nothing. A changed policy is an update; groups no app of the new policy is entitled to are \
            crypto-shredded. A change of mode needs --force and removes every app's credentials. An app whose first \
            (default) access group another app shares is warned of on standard error; provisioning goes on.
            """
    )

    @OptionGroup var store: StoreLocation
    @Option(help: ArgumentHelp("The device policy file.", valueName: "file")) var policy: String
    @Flag(help: "Allow a change of device mode (wipes every app's credentials).") var force = false
    @OptionGroup var sealing: SealingOptions
    @OptionGroup var output: OutputOptions

    struct Summary: Encodable {
        var outcome: ManagedDevice.ProvisioningOutcome
        var device: DeviceInformation
        var auditPublicKey: String
    }

    func run() throws {
        try runReportingErrors {
            let document = try readBounded(policy, limit: InputLimits.policyDocumentBytes, what: "policy file")
            let decoded: DevicePolicy
            do {
                decoded = try DevicePolicy.decode(document)
            } catch {
                throw CLIError(exitCode: .badInput, "invalid policy \(policy): \(error); nothing was changed")
            }
            try Self.refuseReadableSecret(decoded, policyFile: policy)
            PolicyWarnings.report(decoded, file: policy)
            let sealing = try self.sealing.sealing(policy: decoded)
            let device = ManagedDevice(store: try store.open(), logger: store.logger)
            let (outcome, record) = try reportingDeviceErrors { () throws(SharedDeviceError) in
                try device.provision(policyDocument: document, force: force, actor: Actor.current)
            }
            // Sealed once the store and its key file exist (a store already sealed stays as it is: a new sealing
            // takes a new key, `key rotate`).
            let current = SealedKeyFile.sealing(in: store.directory)
            if let sealing, current == nil {
                try SealingOptions.seal(sealing, store: store)
            } else if let sealing, let current, sealing != current {
                FileHandle.standardError.write(
                    Data(
                        "devicectl: note: the store's key is sealed as \(current.description), the policy asks for \(sealing.description): run `devicectl key rotate` to seal a new key so\n"
                            .utf8
                    )
                )
            }
            let key = Hex.encode(record.auditPublicKey)
            if output.json {
                try Output.json(
                    Summary(outcome: outcome, device: DeviceInformation(record: record), auditPublicKey: key)
                )
                return
            }
            switch outcome {
            case .provisioned:
                Output.print(
                    "provisioned \(record.mode.rawValue)-mode device \"\(record.name.forTerminal)\" (id \(record.deviceID))"
                )
            case .unchanged: Output.print("already provisioned with this policy; nothing changed")
            case .updated:
                Output.print("policy updated on device \"\(record.name.forTerminal)\" (id \(record.deviceID))")
            case .modeChanged:
                Output.print("device mode changed to \(record.mode.rawValue); every app's credentials were removed")
            }
            Output.print("policy sha256 \(record.policySHA256)")
            Output.print("audit public key \(key) (keep it to verify the audit log elsewhere)")
        }
    }

    /// A policy that holds the authority's `clientSecret` must be readable by its owner only: refused (78,
    /// nothing changed) when its group or other users may read it.
    static func refuseReadableSecret(_ policy: DevicePolicy, policyFile path: String) throws {
        guard policy.authority.clientSecret != nil else { return }
        guard let permissions = (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int
        else { return }
        guard permissions & 0o066 == 0 else {
            let mode = String(permissions & 0o7777, radix: 8)
            throw CLIError(
                exitCode: .configuration,
                """
                the policy file \(path) holds authority.clientSecret and other users may read it (mode \(mode)); \
                run: chmod 600 \(path) (and keep it owned by root), then provision again; nothing was changed
                """
            )
        }
    }
}

struct Deprovision: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove all app data and keys (crypto-shred); the audit log stays readable and verifiable."
    )

    @OptionGroup var store: StoreLocation
    @Option(help: "Why (recorded in the audit log).") var reason: String?
    @OptionGroup var output: OutputOptions

    func run() throws {
        try runReportingErrors {
            let device = ManagedDevice(store: try store.openExisting(), logger: store.logger)
            let outcome = try reportingDeviceErrors { () throws(SharedDeviceError) in
                try device.deprovision(actor: Actor.current, reason: reason)
            }
            if output.json {
                try Output.json(outcome)
            } else if outcome.wasProvisioned {
                Output.print(
                    "deprovisioned: \(outcome.groupsRemoved) access group(s) and \(outcome.itemsRemoved) item(s) crypto-shredded; the audit log is kept"
                )
            } else {
                Output.print("the device is not provisioned; nothing to do")
            }
        }
    }
}

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the device information apps get: mode (shared or private), device id and name, policy.",
        discussion:
            "An unprovisioned device reports private mode. If the store cannot be read, the default information is shown and the error is reported (non-zero exit)."
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var output: OutputOptions

    struct Result: Encodable {
        var information: DeviceInformation
        var keyProtection: String
        var error: String?

        func encode(to encoder: any Encoder) throws {
            try information.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(keyProtection, forKey: Key(stringValue: "keyProtection")!)
            try container.encode(error, forKey: Key(stringValue: "error")!)
        }

        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init?(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
    }

    /// How the store's master key is held: `sealed: tpm2 (PCRs 7)`, `credential loaded by systemd`,
    /// `passphrase`, `file`.
    static func keyProtection(_ store: StoreLocation) -> String {
        if store.passphraseFile != nil { return "passphrase" }
        if store.keyFile != nil { return "file" }
        switch MasterKeySource.forStore(in: store.directory) {
        case .keyFile(let url) where url.lastPathComponent == SealedKeyFile.credentialName:
            return "sealed: credential loaded by systemd"
        case .sealedKeyFile:
            return "sealed: \(SealedKeyFile.sealing(in: store.directory)?.description ?? "systemd credential")"
        default: return "file"
        }
    }

    func run() throws {
        try runReportingErrors {
            let (information, error) = DeviceInformation.current(
                stateDirectory: store.directory,
                key: try store.keySource(),
                logger: store.logger
            )
            let protection = Self.keyProtection(store)
            if output.json {
                try Output.json(Result(information: information, keyProtection: protection, error: error?.description))
            } else {
                Output.print("mode: \(information.mode.rawValue)")
                Output.print("key: \(protection)")
                if let id = information.deviceID {
                    Output.print("device: \((information.deviceName ?? "").forTerminal) (id \(id.forTerminal))")
                    Output.print(
                        "policy: \(information.policyID?.forTerminal ?? "(no id)") sha256 \((information.policySHA256 ?? "").forTerminal)"
                    )
                    if let at = information.provisionedAt { Output.print("provisioned: \(at.formatted(.iso8601))") }
                    if let at = information.policyAppliedAt {
                        Output.print("policy applied: \(at.formatted(.iso8601))")
                    }
                } else {
                    Output.print("device: not provisioned")
                }
                for (key, value) in information.extraDeviceInformation.sorted(by: { $0.key < $1.key }) {
                    Output.print("\(key.forTerminal): \(value.forTerminal)")
                }
            }
            if let error {
                _ = try reportingDeviceErrors { () throws(SharedDeviceError) in throw error }
            }
        }
    }
}
