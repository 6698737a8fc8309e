import ArgumentParser
import Foundation
import KeychainStore
import SharedDevice

/// `devicectl key …`: how the store's master key is held.
struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract:
            "Seal the store's master key to this device (TPM2 and/or host key, through systemd-creds), or rotate it.",
        subcommands: [SealKey.self, RotateKey.self]
    )
}

/// The options of a sealing: `--seal`/`--with` and `--tpm2-pcrs`.
struct SealingOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Seal the master key with tpm2, host or tpm2+host (systemd-creds --with-key).",
            valueName: "key"
        )
    )
    var seal: String?

    @Option(
        help: ArgumentHelp(
            "TPM2 PCRs the key is bound to, joined by + (default 7, the Secure Boot state).",
            valueName: "pcrs"
        )
    )
    var tpm2Pcrs: String?

    /// The sealing asked for: `--seal`, else the policy's `keyProtection`; nil when neither names one.
    /// - Throws: a usage error when both do and they differ.
    func sealing(policy: DevicePolicy?) throws -> KeySealing? {
        try Self.sealing(seal: seal, pcrs: tpm2Pcrs, policy: policy)
    }

    /// `--seal`/`--with` and `--tpm2-pcrs` as given, else the policy's `keyProtection`.
    static func sealing(seal: String?, pcrs: String?, policy: DevicePolicy?) throws -> KeySealing? {
        let wanted = policy?.keyProtection?.sealing
        guard let seal else {
            if pcrs != nil {
                throw CLIError(exitCode: .usage, "--tpm2-pcrs needs a TPM2 sealing: give tpm2 or tpm2+host too")
            }
            return wanted
        }
        let given = try sealing(seal: seal, pcrs: pcrs ?? "7")
        if let wanted, wanted != given {
            throw CLIError(
                exitCode: .usage,
                "the policy's keyProtection asks for \(wanted.description), the command line for \(given.description); leave the sealing to the policy, or change the policy"
            )
        }
        return given
    }

    /// The policy the device in `store` was provisioned with (nil before provisioning); the store is closed
    /// again at once.
    static func policy(of store: StoreLocation) throws -> DevicePolicy? {
        let device = ManagedDevice(store: try store.openExisting(), logger: store.logger)
        return try reportingDeviceErrors { () throws(SharedDeviceError) in try device.policy() }
    }

    /// A sealing with `seal` (`tpm2`, `host`, `tpm2+host`) and `pcrs` (`7`, `7+16`).
    static func sealing(seal: String, pcrs tpm2Pcrs: String) throws -> KeySealing {
        guard let binding = KeySealing.Binding(rawValue: seal) else {
            throw CLIError(exitCode: .usage, "unknown key \(seal) to seal with; use tpm2, host or tpm2+host")
        }
        let pcrs = tpm2Pcrs.split(separator: "+").map { Int($0) }
        guard !pcrs.isEmpty, pcrs.allSatisfy({ $0.map { (0...23).contains($0) } ?? false }) else {
            throw CLIError(
                exitCode: .usage,
                "--tpm2-pcrs takes PCR numbers 0–23 joined by + (7, or 7+16); an empty list would never unseal"
            )
        }
        return KeySealing(binding: binding, pcrs: pcrs.compactMap { $0 })
    }

    /// The system's state directory, the one `deviced.service` serves.
    static let serviceStateDirectory = "/var/lib/devicectl"
    /// Where the unit's drop-in goes: `deviced.service` gets the sealed key through `LoadCredentialEncrypted=`.
    static let serviceDropIn = "/etc/systemd/system/deviced.service.d/sealed-key.conf"

    /// Seals the store's key in `location` and audits it (`device.key_sealed`); for the system's state
    /// directory, also has systemd hand the service the key (`installServiceDropIn`).
    static func seal(_ sealing: KeySealing, store location: StoreLocation) throws {
        // The key file must open this store before it is sealed.
        let store = try location.openExisting()
        try reportingErrors { () throws(KeychainError) in
            try SealedKeyFile.seal(directory: location.directory, sealing: sealing)
        }
        if location.directory.standardizedFileURL.path == serviceStateDirectory { try installServiceDropIn() }
        let device = ManagedDevice(store: store, logger: location.logger)
        _ = try reportingDeviceErrors { () throws(SharedDeviceError) in
            try device.record(
                AuditEntry(
                    type: .deviceKeySealed,
                    actor: Actor.current,
                    reason: "master key sealed",
                    details: [
                        "binding": sealing.binding.rawValue,
                        "pcrs": sealing.pcrs.map(String.init).joined(separator: "+"),
                    ]
                )
            )
        }
    }
}

extension SealingOptions {
    /// Writes the drop-in that has systemd decrypt the sealed key for `deviced.service`
    /// (`LoadCredentialEncrypted=`; the daemon, with `PrivateDevices=yes`, cannot reach the TPM itself) and
    /// reloads systemd when it runs. Written only once the key is sealed: a unit naming a missing
    /// credential does not start.
    static func installServiceDropIn() throws {
        let url = URL(fileURLWithPath: serviceDropIn)
        let text = """
            # Written by `devicectl key seal`: systemd decrypts the store's master key, sealed to this device, for deviced
            # ($CREDENTIALS_DIRECTORY/\(SealedKeyFile.credentialName)).
            [Service]
            LoadCredentialEncrypted=\(SealedKeyFile.credentialName):\(serviceStateDirectory)/\(SealedKeyFile.fileName)

            """
        do {
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            try Data(text.utf8).write(to: url, options: .atomic)
        } catch {
            throw CLIError(
                exitCode: .ioError,
                "the key is sealed, but the unit's drop-in \(serviceDropIn) could not be written (\(error)); write it by hand: \(text)"
            )
        }
        guard FileManager.default.fileExists(atPath: "/run/systemd/system") else { return }
        let reload = Process()
        reload.executableURL = URL(fileURLWithPath: "/bin/systemctl")
        reload.arguments = ["daemon-reload"]
        try? reload.run()
        reload.waitUntilExit()
    }
}

extension AuditEventType {
    /// The store's master key was sealed to the device (details: binding, pcrs).
    static let deviceKeySealed = AuditEventType("device.key_sealed")
    /// The store's master key was replaced by a new one (details: groups, sealing).
    static let deviceKeyRotated = AuditEventType("device.key_rotated")
}

struct SealKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seal",
        abstract:
            "Seal the master key of an existing store: master.key becomes master.key.cred, which opens only here.",
        discussion: """
            The key is encrypted by systemd-creds (SYSTEMD_TPM2_DEVICE and SYSTEMD_CREDENTIAL_SECRET apply), checked by \
            decrypting it again, then the plaintext key file is overwritten and removed. Afterwards root's devicectl \
            opens the store by itself (systemd-creds decrypt) and deviced.service gets the key through \
            LoadCredentialEncrypted=. A copy of the state directory does not open on another device (exit 78).
            """
    )

    @OptionGroup var store: StoreLocation
    @Option(
        help: ArgumentHelp(
            "What to seal with: tpm2, host or tpm2+host (default: the policy's keyProtection).",
            valueName: "key"
        )
    )
    var with: String?
    @Option(help: ArgumentHelp("TPM2 PCRs the key is bound to, joined by + (default 7).", valueName: "pcrs"))
    var tpm2Pcrs: String?
    @OptionGroup var output: OutputOptions

    func run() throws {
        try runReportingErrors {
            let policy = try SealingOptions.policy(of: store)
            guard let sealing = try SealingOptions.sealing(seal: with, pcrs: tpm2Pcrs, policy: policy) else {
                throw CLIError(
                    exitCode: .usage,
                    "say what to seal with: --with tpm2, host or tpm2+host (the policy has no keyProtection)"
                )
            }
            try SealingOptions.seal(sealing, store: store)
            if output.json {
                try Output.json(["keyProtection": "sealed", "sealing": sealing.description])
            } else {
                Output.print("master key sealed: \(sealing.description); \(KeychainStore.keyFileName) removed")
            }
        }
    }
}

struct RotateKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate",
        abstract: "Replace the store's master key with a new one, held as the old one was (key file, or sealed alike).",
        discussion: """
            Every access group's key is re-wrapped under the new key in one transaction; the items stay as they are. \
            The new key is written (and sealed, and checked) before the transaction commits and renamed over the old \
            one after it: killed at any point, the store opens, and the next open or rotation finishes the job. \
            deviced must not serve the store meanwhile: stop deviced.socket and deviced.service first (exit 69 while \
            it holds the state directory), start deviced.socket afterwards. The old key opens the store no more (exit 47).
            """
    )

    @OptionGroup var store: StoreLocation
    @OptionGroup var output: OutputOptions
    /// Kills devicectl at a step of the rotation (crash tests): `pending-key-written` or `committed`.
    @Option(help: .hidden) var killAfter: String?

    /// What `--json` prints.
    struct RotationSummary: Encodable {
        var rotated = true
        var groups: Int
        var keyProtection: String
    }

    func validate() throws {
        if store.keyFile != nil || store.passphraseFile != nil {
            throw ValidationError(
                "key rotate replaces the state directory's own key (master.key or master.key.cred); drop --key-file and --passphrase-file"
            )
        }
    }

    func run() throws {
        try runReportingErrors {
            let kill = try killAfter.map { name throws -> MasterKeyRotation.Step in
                guard let step = MasterKeyRotation.Step(rawValue: name) else {
                    throw CLIError(exitCode: .usage, "unknown step \(name)")
                }
                return step
            }
            let logger = store.logger
            // A sealed key follows the policy's keyProtection (its PCRs changed: the new key is sealed so).
            let current = SealedKeyFile.sealing(in: store.directory)
            // One opening (one unsealing) for the policy and the rotation.
            let opened = try store.openExisting()
            let policy = try reportingDeviceErrors { () throws(SharedDeviceError) in
                try ManagedDevice(store: opened, logger: logger).policy()
            }
            let resealing = current == nil ? nil : policy?.keyProtection?.sealing
            let keyProtection = (resealing ?? current)?.description ?? "key file"
            let actor = Actor.current
            // The audit entry commits with the rotation, or neither does.
            let result = try reportingErrors { () throws(KeychainError) in
                try MasterKeyRotation.rotate(
                    opened,
                    resealing: resealing,
                    logger: logger,
                    recording: { store, transaction, groups in
                        try ManagedDevice(store: store, logger: logger).append(
                            AuditEntry(
                                type: .deviceKeyRotated,
                                actor: actor,
                                reason: "master key rotated",
                                details: ["groups": "\(groups)", "keyProtection": keyProtection]
                            ),
                            in: transaction
                        )
                    },
                    passed: { step in
                        if step == kill { raise(SIGKILL) }
                    }
                )
            }
            let sealing = result.sealing?.description ?? "key file"
            if output.json {
                try Output.json(RotationSummary(groups: result.groups, keyProtection: sealing))
            } else {
                Output.print("master key rotated: \(result.groups) group keys re-wrapped; held as: \(sealing)")
            }
        }
    }
}
