import CSodium
public import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// How a sealed master key is bound: systemd-creds' `--with-key` and, for a TPM2, the PCRs whose values it
/// must find at unsealing (7, the Secure Boot state, by default).
public struct KeySealing: Sendable, Equatable, Codable {
    /// What the credential is encrypted with.
    public enum Binding: String, Sendable, Codable, CaseIterable, Equatable {
        /// The host key (`/var/lib/systemd/credential.secret`, or `$SYSTEMD_CREDENTIAL_SECRET`).
        case host
        /// The device's TPM2.
        case tpm2
        /// Both: the TPM2 and the host key.
        case tpm2Host = "tpm2+host"

        /// Whether a TPM2 takes part (and PCRs bind it).
        public var usesTPM: Bool { self != .host }
    }

    public var binding: Binding
    /// The TPM2 PCRs the key is bound to (empty for `host`).
    public var pcrs: [Int]

    public init(binding: Binding, pcrs: [Int] = [7]) {
        self.binding = binding
        self.pcrs = binding.usesTPM ? pcrs : []
    }

    /// `host`, `tpm2 (PCRs 7)`, `tpm2+host (PCRs 7+16)`.
    public var description: String {
        binding.usesTPM ? "\(binding.rawValue) (PCRs \(pcrs.map(String.init).joined(separator: "+")))" : binding.rawValue
    }
}

/// The store's master key sealed as a systemd credential (`systemd-creds`, `master.key.cred` in the state
/// directory): copied, the state directory opens nowhere else, because only this device's TPM2 (and/or
/// host key) decrypts it. Under systemd, `deviced.service` has it decrypted with `LoadCredentialEncrypted=`
/// and reads `$CREDENTIALS_DIRECTORY/sharedmode-master-key`; any other process of root runs
/// `systemd-creds decrypt` itself (so `SYSTEMD_TPM2_DEVICE` and `SYSTEMD_CREDENTIAL_SECRET` apply).
public enum SealedKeyFile {
    /// The sealed key in the state directory.
    public static let fileName = "master.key.cred"
    /// How it is sealed (JSON, no secret), beside it.
    public static let sealingFileName = "master.key.seal"
    /// The credential's name (systemd-creds `--name`, and the unit's `LoadCredentialEncrypted=` id).
    public static let credentialName = "sharedmode-master-key"

    /// How the key of the store in `directory` is sealed, nil when it is not.
    public static func sealing(in directory: URL) -> KeySealing? {
        guard FileManager.default.fileExists(atPath: directory.appendingPathComponent(fileName).path) else { return nil }
        let file = directory.appendingPathComponent(sealingFileName)
        return (try? Data(contentsOf: file)).flatMap { try? JSONDecoder().decode(KeySealing.self, from: $0) }
            ?? KeySealing(binding: .tpm2, pcrs: [])
    }

    /// Seals the key file of the store in `directory` and removes the plaintext key file. In order, so that
    /// a crash at any point leaves a store that opens: the credential is written beside the key file and
    /// decrypted again to check it (a credential that cannot be unsealed here never replaces the key),
    /// then moved into place, then the key file is overwritten with zeros, flushed and unlinked. A store
    /// whose key file and credential both exist (a crash before the last step) is finished.
    /// - Throws: `wrongKey` when there is no key file (a passphrase store, or already sealed) or the new
    ///   credential does not open; `ioError` when systemd-creds is missing or fails.
    public static func seal(directory: URL, sealing: KeySealing, environment: [String: String] = ProcessInfo.processInfo.environment) throws(KeychainError) {
        let keyURL = directory.appendingPathComponent(KeychainStore.keyFileName)
        let sealedURL = directory.appendingPathComponent(fileName)
        guard let key = try KeyFile.load(FilePath(keyURL.path)) else {
            if FileManager.default.fileExists(atPath: sealedURL.path) {
                throw KeychainError(.wrongKey, "the store's key is sealed already (\(sealedURL.path)); nothing was changed")
            }
            throw KeychainError(.wrongKey, "no key file \(keyURL.path) to seal (a store protected by a passphrase cannot be sealed)")
        }
        if FileManager.default.fileExists(atPath: sealedURL.path) {
            // A crash after the credential was moved into place: it must open to this key, then the key file goes.
            try check(try unseal(sealedURL, environment: environment), equals: key, what: sealedURL.path)
            try KeyFile.destroy(FilePath(keyURL.path))
            return
        }
        let temporary = directory.appendingPathComponent(".\(fileName).\(getpid()).tmp")
        defer { try? FileManager.default.removeItem(at: temporary) }
        try write(key, sealedWith: sealing, to: temporary, environment: environment)
        do {
            let description = try JSONEncoder().encode(sealing)
            try description.write(to: directory.appendingPathComponent(sealingFileName), options: .atomic)
            try FileManager.default.moveItem(at: temporary, to: sealedURL)
        } catch {
            throw KeychainError(.ioError, "cannot put the sealed key in place in \(directory.path): \(error); the key file is unchanged")
        }
        KeyFile.syncDirectory(FilePath(directory.path))
        try KeyFile.destroy(FilePath(keyURL.path))
    }

    /// Seals `key` with `sealing` into a new credential at `url` (handed to systemd-creds through a pipe:
    /// the key never touches the disk in clear), then decrypts it again to check it.
    /// - Throws: `wrongKey` when the new credential does not open to `key`; `ioError` when systemd-creds
    ///   is missing or fails.
    static func write(_ key: SecureKey, sealedWith sealing: KeySealing, to url: URL,
                      environment: [String: String] = ProcessInfo.processInfo.environment) throws(KeychainError) {
        var arguments = ["encrypt", "--name=\(credentialName)", "--with-key=\(sealing.binding.rawValue)"]
        if sealing.binding.usesTPM {
            arguments.append("--tpm2-pcrs=\(sealing.pcrs.map(String.init).joined(separator: "+"))")
        }
        var input = key.withUnsafeBytes { Data($0) }
        defer { input.resetBytes(in: 0..<input.count) }
        _ = try systemdCreds(arguments + ["-", url.path], environment: environment, input: input)
        try check(try unseal(url, environment: environment), equals: key, what: url.path)
    }

    /// Decrypts a sealed key with `systemd-creds decrypt` into locked memory.
    /// - Throws: `wrongKey` saying why it does not open here (another device's TPM or host key, changed
    ///   PCRs, no TPM); `ioError` when systemd-creds is missing.
    static func unseal(_ url: URL, environment: [String: String] = ProcessInfo.processInfo.environment) throws(KeychainError) -> SecureKey {
        var plain = try systemdCreds(["decrypt", "--name=\(credentialName)", url.path, "-"], environment: environment, sealed: url)
        defer { plain.resetBytes(in: 0..<plain.count) }
        guard plain.count == SecureKey.byteCount else {
            throw KeychainError(.wrongKey, "the sealed key \(url.path) holds \(plain.count) bytes, not a \(SecureKey.byteCount)-byte key; restore the state directory from backup")
        }
        return try SecureKey.copying(plain)
    }

    static func check(_ unsealed: SecureKey, equals key: SecureKey, what: String) throws(KeychainError) {
        let same = unsealed.withUnsafeBytes { a in
            key.withUnsafeBytes { b in a.count == b.count && sodium_memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 }
        }
        guard same else { throw KeychainError(.wrongKey, "the credential \(what) does not hold the key sealed into it; nothing was changed") }
    }

    /// Runs systemd-creds and returns its standard output.
    private static func systemdCreds(_ arguments: [String], environment: [String: String], sealed: URL? = nil,
                                     input: Data? = nil) throws(KeychainError) -> Data {
        guard let executable = ["/usr/bin/systemd-creds", "/bin/systemd-creds"].first(where: FileManager.default.isExecutableFile(atPath:)) else {
            throw KeychainError(.ioError, "systemd-creds is not installed; the store's key is sealed with it: install systemd 250 or later")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let standardInput = Pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : standardInput
        do {
            try process.run()
        } catch {
            throw KeychainError(.ioError, "cannot run \(executable): \(error)")
        }
        if let input {
            // 32 bytes: far below a pipe's buffer, so the write never waits for the reader.
            try? standardInput.fileHandleForWriting.write(contentsOf: input)
            try? standardInput.fileHandleForWriting.close()
        }
        let stdout = output.fileHandleForReading.readDataToEndOfFile()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            var wiped = stdout
            wiped.resetBytes(in: 0..<wiped.count)
            throw failure(arguments[0], stderr: stderr, sealed: sealed)
        }
        return stdout
    }

    /// Why systemd-creds refused, in words an administrator acts on.
    static func failure(_ verb: String, stderr: String, sealed: URL?) -> KeychainError {
        let detail = stderr.split(separator: "\n").last.map(String.init)?.trimmingCharacters(in: .whitespaces) ?? ""
        guard verb == "decrypt", let sealed else {
            return KeychainError(.ioError, "systemd-creds \(verb) failed: \(detail); nothing was changed")
        }
        let reason: String
        if stderr.contains("integrity check failed") || stderr.contains("Failed to load HMAC key in TPM") {
            reason = "it is sealed to another device's TPM"
        } else if stderr.contains("policy digest does not match") || stderr.contains("PCR") && stderr.contains("not match") {
            reason = "the TPM's PCRs changed since it was sealed (the boot chain or Secure Boot state differs)"
        } else if stderr.contains("TPM2 support not installed") || stderr.contains("No TPM2") || stderr.contains("TPM2 device") {
            reason = "it is sealed to a TPM2 and none can be used here (\(detail))"
        } else if stderr.contains("local credential key") || stderr.contains("host key") || stderr.contains("credential.secret")
                    || stderr.contains("Failed to decrypt") {
            reason = "it is sealed to another device's host key"
        } else {
            reason = "systemd-creds could not decrypt it (\(detail))"
        }
        return KeychainError(.wrongKey, "the store's master key \(sealed.path) does not open on this device: \(reason); nothing was changed. A copied state directory opens only on the device that sealed it")
    }
}
