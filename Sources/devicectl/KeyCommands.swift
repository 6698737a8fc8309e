import ArgumentParser
import Foundation
import KeychainStore
import SharedDevice

/// `devicectl key …`: how the store's master key is held.
struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Seal the store's master key to this device (TPM2 and/or host key, through systemd-creds).",
        subcommands: [SealKey.self])
}

/// The options of a sealing: `--seal`/`--with` and `--tpm2-pcrs`.
struct SealingOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Seal the master key with tpm2, host or tpm2+host (systemd-creds --with-key).", valueName: "key"))
    var seal: String?

    @Option(help: ArgumentHelp("TPM2 PCRs the key is bound to, joined by + (default 7, the Secure Boot state).", valueName: "pcrs"))
    var tpm2Pcrs: String = "7"

    /// The sealing asked for, nil without `--seal`.
    func sealing() throws -> KeySealing? {
        guard let seal else { return nil }
        guard let binding = KeySealing.Binding(rawValue: seal) else {
            throw CLIError(exitCode: .usage, "unknown key \(seal) to seal with; use tpm2, host or tpm2+host")
        }
        let pcrs = tpm2Pcrs.split(separator: "+").map { Int($0) }
        guard !pcrs.isEmpty, pcrs.allSatisfy({ $0.map { (0...23).contains($0) } ?? false }) else {
            throw CLIError(exitCode: .usage, "--tpm2-pcrs takes PCR numbers 0–23 joined by + (7, or 7+16); an empty list would never unseal")
        }
        return KeySealing(binding: binding, pcrs: pcrs.compactMap { $0 })
    }

    /// Seals the store's key in `location` and audits it (`device.key_sealed`).
    static func seal(_ sealing: KeySealing, store location: StoreLocation) throws {
        // The key file must open this store before it is sealed.
        let store = try location.openExisting()
        try reportingErrors { () throws(KeychainError) in try SealedKeyFile.seal(directory: location.directory, sealing: sealing) }
        let device = ManagedDevice(store: store, logger: location.logger)
        _ = try reportingDeviceErrors { () throws(SharedDeviceError) in
            try device.record(AuditEntry(type: .deviceKeySealed, actor: Actor.current, reason: "master key sealed",
                                         details: ["binding": sealing.binding.rawValue, "pcrs": sealing.pcrs.map(String.init).joined(separator: "+")]))
        }
    }
}

extension AuditEventType {
    /// The store's master key was sealed to the device (details: binding, pcrs).
    static let deviceKeySealed = AuditEventType("device.key_sealed")
}

struct SealKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seal",
        abstract: "Seal the master key of an existing store: master.key becomes master.key.cred, which opens only here.",
        discussion: """
            The key is encrypted by systemd-creds (SYSTEMD_TPM2_DEVICE and SYSTEMD_CREDENTIAL_SECRET apply), checked by \
            decrypting it again, then the plaintext key file is overwritten and removed. Afterwards root's devicectl \
            opens the store by itself (systemd-creds decrypt) and deviced.service gets the key through \
            LoadCredentialEncrypted=. A copy of the state directory does not open on another device (exit 78).
            """)

    @OptionGroup var store: StoreLocation
    @Option(help: ArgumentHelp("What to seal with: tpm2, host or tpm2+host.", valueName: "key")) var with: String
    @Option(help: ArgumentHelp("TPM2 PCRs the key is bound to, joined by + (default 7).", valueName: "pcrs")) var tpm2Pcrs: String = "7"
    @OptionGroup var output: OutputOptions

    func run() throws {
        try runReportingErrors {
            var options = SealingOptions()
            options.seal = with
            options.tpm2Pcrs = tpm2Pcrs
            guard let sealing = try options.sealing() else { return }
            try SealingOptions.seal(sealing, store: store)
            if output.json { try Output.json(["keyProtection": "sealed", "sealing": sealing.description]) }
            else { Output.print("master key sealed: \(sealing.description); \(KeychainStore.keyFileName) removed") }
        }
    }
}
