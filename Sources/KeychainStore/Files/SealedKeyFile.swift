import CSodium
public import Foundation
import PathSafety
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
        binding.usesTPM
            ? "\(binding.rawValue) (PCRs \(pcrs.map(String.init).joined(separator: "+")))" : binding.rawValue
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

    /// The most a sealed key file may hold (a TPM2-sealed 32-byte key is about 1 KiB of base64).
    static let fileLimit = 64 << 10

    /// How the key of the store in `directory` is sealed, nil when it is not (or the directory cannot be
    /// reached safely: opening the store then says why).
    public static func sealing(in directory: URL) -> KeySealing? {
        guard let held = try? StateDirectory.existing(directory) else { return nil }
        return sealing(in: held)
    }

    /// How the key of the store in the held state directory is sealed, nil when it is not. The description
    /// (`master.key.seal`) is read without following a symbolic link.
    static func sealing(in directory: SafeDirectory) -> KeySealing? {
        guard (try? directory.status(of: fileName)) != nil else { return nil }
        return (try? directory.contents(of: sealingFileName, limit: 4096)).flatMap { $0 }
            .flatMap { try? JSONDecoder().decode(KeySealing.self, from: Data($0)) }
            ?? KeySealing(binding: .tpm2, pcrs: [])
    }

    /// Seals the key file of the store in `directory` and removes the plaintext key file. In order, so that
    /// a crash at any point leaves a store that opens: the credential is written beside the key file and
    /// decrypted again to check it (a credential that cannot be unsealed here never replaces the key),
    /// then moved into place, then the key file is overwritten with zeros, flushed and unlinked. A store
    /// whose key file and credential both exist (a crash before the last step) is finished. Every file is
    /// reached relative to the state directory, held once it was checked (`StateDirectory`), with `O_NOFOLLOW`.
    /// - Throws: `wrongKey` when there is no key file (a passphrase store, or already sealed) or the new
    ///   credential does not open; `ioError` when systemd-creds is missing or fails; `insecureStateDirectory`,
    ///   `insecureKeyFile` when a file or the directory could be swapped by another user.
    public static func seal(
        directory: URL,
        sealing: KeySealing,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(KeychainError) {
        let held = try StateDirectory.existing(directory)
        let keyFile = KeyFile.Location(directory: held, name: KeychainStore.keyFileName)
        let sealed = keyFile.sibling(fileName)
        guard let key = try KeyFile.load(keyFile) else {
            if sealed.exists {
                throw KeychainError(
                    .wrongKey,
                    "the store's key is sealed already (\(sealed.path)); nothing was changed"
                )
            }
            throw KeychainError(
                .wrongKey,
                "no key file \(keyFile.path) to seal (a store protected by a passphrase cannot be sealed)"
            )
        }
        if sealed.exists {
            // A crash after the credential was moved into place: it must open to this key, then the key file goes.
            try check(try unseal(sealed, environment: environment), equals: key, what: sealed.path.string)
            try KeyFile.destroy(keyFile)
            return
        }
        let temporary = keyFile.sibling(".\(fileName).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp")
        defer { try? held.remove(temporary.name) }
        try write(key, sealedWith: sealing, to: temporary, environment: environment)
        let description = Array((try? JSONEncoder().encode(sealing)) ?? Data())
        do throws(Errno) {
            try held.replace(sealingFileName, with: description)
            try held.rename(temporary.name, to: fileName)
        } catch {
            throw KeychainError(
                .ioError,
                "cannot put the sealed key in place in \(held.path): \(error); the key file is unchanged"
            )
        }
        held.sync()
        try KeyFile.destroy(keyFile)
    }

    /// Seals `key` with `sealing` into a new credential at `location` (`O_EXCL`, never through a link, mode
    /// 0600, flushed), then decrypts it again to check it. The key goes to `systemd-creds encrypt` through
    /// a pipe and the credential comes back through one (`- -`): the key never touches the disk in clear,
    /// and no path is handed to the child.
    /// - Throws: `wrongKey` when the new credential does not open to `key`; `ioError` when systemd-creds
    ///   is missing or fails, or the file cannot be written.
    static func write(
        _ key: SecureKey,
        sealedWith sealing: KeySealing,
        to location: KeyFile.Location,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(KeychainError) {
        var arguments = [
            "encrypt", "--name=\(credentialName)", "--with-key=\(sealing.binding.rawValue)", "--newline=no",
        ]
        if sealing.binding.usesTPM {
            arguments.append("--tpm2-pcrs=\(sealing.pcrs.map(String.init).joined(separator: "+"))")
        }
        var input = key.withUnsafeBytes { Data($0) }
        defer { input.resetBytes(in: 0..<input.count) }
        let credential = try systemdCreds(arguments + ["-", "-"], environment: environment, input: input)
        guard !credential.isEmpty, credential.count <= fileLimit else {
            throw KeychainError(
                .ioError,
                "systemd-creds encrypt gave \(credential.count) bytes for \(location.path); nothing was changed"
            )
        }
        do throws(Errno) {
            let descriptor = try location.directory.openFile(
                location.name,
                .writeOnly,
                options: [.create, .exclusiveCreate],
                permissions: [.ownerReadWrite]
            )
            do {
                _ = try descriptor.closeAfter {
                    _ = try descriptor.writeAll(credential)
                    try Syscalls.fsync(descriptor)
                }
            } catch {
                try? location.directory.remove(location.name)
                throw error as? Errno ?? .ioError
            }
        } catch {
            throw KeychainError(.ioError, "cannot write the sealed key \(location.path): \(error); nothing was changed")
        }
        try check(try unseal(location, environment: environment), equals: key, what: location.path.string)
    }

    /// Decrypts the sealed key at `location` with `systemd-creds decrypt` into locked memory. The file is
    /// read here (`O_NOFOLLOW`, a regular file) and handed to systemd-creds through a pipe.
    /// - Throws: `wrongKey` saying why it does not open here (another device's TPM or host key, changed
    ///   PCRs, no TPM); `insecureKeyFile` for a symbolic link; `ioError` when systemd-creds is missing.
    static func unseal(
        _ location: KeyFile.Location,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(KeychainError) -> SecureKey {
        let credential: [UInt8]
        do throws(Errno) {
            guard let bytes = try location.directory.contents(of: location.name, limit: fileLimit) else {
                throw Errno.noSuchFileOrDirectory
            }
            credential = bytes
        } catch {
            if error == .tooManySymbolicLinkLevels {
                throw KeychainError(
                    .insecureKeyFile,
                    """
                    the sealed key \(location.path) is a symbolic link, and the key is never read through one; nothing was changed: \
                    remove the link and restore the sealed key itself, or restore the state directory from backup
                    """
                )
            }
            if error == .noSuchFileOrDirectory {
                throw KeychainError(
                    .wrongKey,
                    "the sealed key \(location.path) is missing; restore it from backup (this store cannot be opened without it)"
                )
            }
            throw KeychainError(
                .ioError,
                "cannot read the sealed key \(location.path) (\(error == .invalidArgument ? "not a regular file of at most \(fileLimit) bytes" : "\(error)")); restore it from backup"
            )
        }
        var plain = try systemdCreds(
            ["decrypt", "--name=\(credentialName)", "--newline=no", "-", "-"],
            environment: environment,
            sealed: location.path.string,
            input: Data(credential)
        )
        defer { plain.resetBytes(in: 0..<plain.count) }
        guard plain.count == SecureKey.byteCount else {
            throw KeychainError(
                .wrongKey,
                "the sealed key \(location.path) holds \(plain.count) bytes, not a \(SecureKey.byteCount)-byte key; restore the state directory from backup"
            )
        }
        return try SecureKey.copying(plain)
    }

    static func check(_ unsealed: SecureKey, equals key: SecureKey, what: String) throws(KeychainError) {
        let same = unsealed.withUnsafeBytes { a in
            key.withUnsafeBytes { b in a.count == b.count && sodium_memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0
            }
        }
        guard same else {
            throw KeychainError(
                .wrongKey,
                "the credential \(what) does not hold the key sealed into it; nothing was changed"
            )
        }
    }

    /// Runs systemd-creds and returns its standard output.
    private static func systemdCreds(
        _ arguments: [String],
        environment: [String: String],
        sealed: String? = nil,
        input: Data
    ) throws(KeychainError) -> Data {
        guard
            let executable = ["/usr/bin/systemd-creds", "/bin/systemd-creds"].first(
                where: FileManager.default.isExecutableFile(atPath:)
            )
        else {
            throw KeychainError(
                .ioError,
                "systemd-creds is not installed; the store's key is sealed with it: install systemd 250 or later"
            )
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let standardInput = Pipe()
        process.standardInput = standardInput
        do {
            try process.run()
        } catch {
            throw KeychainError(.ioError, "cannot run \(executable): \(error)")
        }
        // A key (32 bytes) or a credential (at most `fileLimit`, 64 KiB: a pipe's buffer): the write never waits
        // for the reader.
        try? standardInput.fileHandleForWriting.write(contentsOf: input)
        try? standardInput.fileHandleForWriting.close()
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
    static func failure(_ verb: String, stderr: String, sealed: String?) -> KeychainError {
        let detail = stderr.split(separator: "\n").last.map(String.init)?.trimmingCharacters(in: .whitespaces) ?? ""
        guard verb == "decrypt", let sealed else {
            return KeychainError(.ioError, "systemd-creds \(verb) failed: \(detail); nothing was changed")
        }
        let reason: String
        if stderr.contains("integrity check failed") || stderr.contains("Failed to load HMAC key in TPM") {
            reason = "it is sealed to another device's TPM"
        } else if stderr.contains("policy digest does not match")
            || stderr.contains("PCR") && stderr.contains("not match")
        {
            reason = "the TPM's PCRs changed since it was sealed (the boot chain or Secure Boot state differs)"
        } else if stderr.contains("TPM2 support not installed") || stderr.contains("No TPM2")
            || stderr.contains("TPM2 device")
        {
            reason = "it is sealed to a TPM2 and none can be used here (\(detail))"
        } else if stderr.contains("local credential key") || stderr.contains("host key")
            || stderr.contains("credential.secret")
            || stderr.contains("Failed to decrypt")
        {
            reason = "it is sealed to another device's host key"
        } else {
            reason = "systemd-creds could not decrypt it (\(detail))"
        }
        return KeychainError(
            .wrongKey,
            "the store's master key \(sealed) does not open on this device: \(reason); nothing was changed. A copied state directory opens only on the device that sealed it"
        )
    }
}
