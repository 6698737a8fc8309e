import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// `devicectl policy validate` through the built binary.
@Suite(.tags(.integration))
struct PolicyCLITests {
    static let policies = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("policies")

    @Test func shippedPoliciesAreValid() async throws {
        for name in ["kiosk.json", "personal.json"] {
            let result = try await DevicectlRunner().run(["policy", "validate", Self.policies.appendingPathComponent(name).path], stateDir: false)
            #expect(result.status == 0, "\(name): \(result.stderr)")
            #expect(result.stdout.contains("valid"))
        }
    }

    @Test func invalidPolicyExits65NamingThePath() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        try FileManager.default.createDirectory(at: cli.stateDirectory, withIntermediateDirectories: true)
        var text = try String(contentsOf: Self.policies.appendingPathComponent("kiosk.json"), encoding: .utf8)
        text = text.replacingOccurrences(of: "\"com.contoso.kiosk.timeclock\"]", with: "\"bad group\"]")
        let file = cli.stateDirectory.appendingPathComponent("bad.json")
        try text.write(to: file, atomically: true, encoding: .utf8)
        let result = try await cli.run(["policy", "validate", file.path], stateDir: false)
        #expect(result.status == 65)
        #expect(result.stderr.contains("apps[1].accessGroups[1]: malformed access group \"bad group\""))
    }

    @Test func aPolicyHoldingAClientSecretThatOthersMayReadIsRefusedNamingTheChmod() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("secret-policy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let file = scratch.appendingPathComponent("kiosk-password.json")
        try Data(contentsOf: Self.policies.appendingPathComponent("kiosk-password.json")).write(to: file)
        for mode in [0o644, 0o640, 0o604] {
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file.path)
            let refused = try await cli.run(["provision", "--policy", file.path])
            #expect(refused.status == 78, "mode \(String(mode, radix: 8)): \(refused.stdout) \(refused.stderr)")
            #expect(refused.stderr.contains("chmod 600 \(file.path)") && refused.stderr.contains("nothing was changed"), "\(refused.stderr)")
            #expect(!refused.stderr.contains("kiosk-password-secret"), "the secret is in the error")
            #expect(!FileManager.default.fileExists(atPath: cli.stateDirectory.appendingPathComponent("keychain.sqlite").path))
        }
        // Owner-only: provisioned. A policy without a secret may be readable by all (kiosk.json is 0644).
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        let provisioned = try await cli.run(["provision", "--policy", file.path])
        #expect(provisioned.status == 0, "\(provisioned.stderr)")
    }
}
