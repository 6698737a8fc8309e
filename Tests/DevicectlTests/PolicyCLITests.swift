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
        for name in ["kiosk.json", "kiosk-b2c.json", "personal.json"] {
            let result = try await DevicectlRunner().run(
                ["policy", "validate", Self.policies.appendingPathComponent(name).path],
                stateDir: false
            )
            #expect(result.status == 0, "\(name): \(result.stderr)")
            #expect(result.stdout.contains("valid"))
        }
    }

    /// Every example policy, copied to a scratch file of mode 0600 (one holds a client secret).
    static func examples(in scratch: URL) throws -> [String] {
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        return try ["kiosk.json", "kiosk-b2c.json", "kiosk-password.json", "kiosk-desktop.json", "personal.json"].map {
            name in
            let file = scratch.appendingPathComponent(name)
            try Data(contentsOf: policies.appendingPathComponent(name)).write(to: file)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
            return file.path
        }
    }

    @Test func theExamplePoliciesListEachAppsOwnGroupFirstSoNeitherCheckingNorProvisioningWarns() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "example-policies-\(UUID().uuidString)"
        )
        defer { try? FileManager.default.removeItem(at: scratch) }
        for file in try Self.examples(in: scratch) {
            let validated = try await DevicectlRunner().run(["policy", "validate", file], stateDir: false)
            #expect(validated.status == 0 && validated.stderr.isEmpty, "\(file): \(validated.stderr)")
            let cli = DevicectlRunner()
            defer { cli.cleanUp() }
            let provisioned = try await cli.run(["provision", "--policy", file])
            #expect(
                provisioned.status == 0 && !provisioned.stderr.contains("warning"),
                "\(file): \(provisioned.stderr)"
            )
        }
    }

    @Test func anAppWhoseFirstGroupAnotherAppSharesIsWarnedOfNamingTheAppTheGroupAndTheFixWithoutFailing() async throws
    {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        // The scanner lists the shared MSAL group first, as the examples once did; the timeclock its own.
        var document = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: Self.policies.appendingPathComponent("kiosk.json")))
                as? [String: Any]
        )
        var apps = try #require(document["apps"] as? [[String: Any]])
        apps[0]["accessGroups"] = ["com.microsoft.adalcache", "com.contoso.kiosk.scanner"]
        document["apps"] = apps
        let file = try cli.writeFile(
            "shared-first.json",
            try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted])
        )
        let expected = """
            devicectl: warning: \(file): app com.contoso.kiosk.scanner's first access group "com.microsoft.adalcache" is shared \
            with com.contoso.kiosk.timeclock: an item com.contoso.kiosk.scanner stores without naming a group goes there, \
            where com.contoso.kiosk.timeclock can read and delete it; list its own group "com.contoso.kiosk.scanner" first
            """
        let validated = try await cli.run(["policy", "validate", file], stateDir: false)
        #expect(validated.status == 0 && validated.stdout.contains("valid"), "\(validated.stdout) \(validated.stderr)")
        #expect(validated.stderr.contains(expected), "\(validated.stderr)")
        #expect(
            !validated.stderr.contains("com.contoso.kiosk.timeclock's first"),
            "the timeclock lists its own group first: \(validated.stderr)"
        )
        let provisioned = try await cli.run(["provision", "--policy", file])
        #expect(
            provisioned.status == 0 && provisioned.stdout.contains("provisioned shared-mode device"),
            "\(provisioned.stdout) \(provisioned.stderr)"
        )
        #expect(provisioned.stderr.contains(expected), "\(provisioned.stderr)")
        #expect(!provisioned.stdout.contains("warning"), "the warning went to standard output: \(provisioned.stdout)")
        // An app with no group of its own is told to add one.
        apps[0]["accessGroups"] = ["com.microsoft.adalcache"]
        document["apps"] = apps
        let noOwn = try cli.writeFile("no-own-group.json", try JSONSerialization.data(withJSONObject: document))
        let told = try await cli.run(["policy", "validate", noOwn], stateDir: false)
        #expect(
            told.status == 0
                && told.stderr.contains(
                    "give it a group of its own (e.g. \"com.contoso.kiosk.scanner\") and list that first"
                ),
            "\(told.stderr)"
        )
    }

    @Test func aPolicyThatIsNotJSONNamesTheLineAndColumnOfItsFirstSyntaxErrorAndNoSecret() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        // A comma dropped after the client secret: the parser stops at the next key's quote.
        let text = try String(contentsOf: Self.policies.appendingPathComponent("kiosk-password.json"), encoding: .utf8)
        let secretLine = try #require(
            text.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains("\"clientSecret\"") }
        )
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        try #require(lines[secretLine].hasSuffix(","), "\(lines[secretLine])")
        let secret = try #require(lines[secretLine].split(separator: "\"").dropFirst(3).first.map(String.init))
        lines[secretLine].removeLast()
        let next = lines[secretLine + 1]
        let column = try #require(next.firstIndex(of: "\"")).utf16Offset(in: next) + 1
        let file = try cli.writeFile("broken.json", Data(lines.joined(separator: "\n").utf8))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        for arguments in [["policy", "validate", file], ["provision", "--policy", file]] {
            let result = try await cli.run(arguments, stateDir: arguments[0] == "provision")
            #expect(result.status == 65, "\(arguments): \(result.stdout) \(result.stderr)")
            #expect(
                result.stderr.contains("not valid JSON: a syntax error at line \(secretLine + 2), column \(column)"),
                "\(arguments): \(result.stderr)"
            )
            #expect(!result.stderr.contains(secret) && !result.stdout.contains(secret), "the secret is in the error")
        }
        #expect(!FileManager.default.fileExists(atPath: cli.databasePath), "a policy that is not JSON created a store")
        // A document cut short names where it ends.
        let cut = try cli.writeFile("cut.json", Data("{\n  \"version\": 1,\n  \"apps\": [\n".utf8))
        let short = try await cli.run(["policy", "validate", cut], stateDir: false)
        #expect(
            short.status == 65 && short.stderr.contains("not valid JSON: the document ends at line 4, column 1"),
            "\(short.stderr)"
        )
    }

    @Test func invalidPolicyExits65NamingThePath() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        try FileManager.default.createDirectory(at: cli.stateDirectory, withIntermediateDirectories: true)
        var text = try String(contentsOf: Self.policies.appendingPathComponent("kiosk.json"), encoding: .utf8)
        text = text.replacingOccurrences(
            of: "\"com.contoso.kiosk.timeclock\", \"com.microsoft.adalcache\"]",
            with: "\"com.contoso.kiosk.timeclock\", \"bad group\"]"
        )
        let file = cli.stateDirectory.appendingPathComponent("bad.json")
        try text.write(to: file, atomically: true, encoding: .utf8)
        let result = try await cli.run(["policy", "validate", file.path], stateDir: false)
        #expect(result.status == 65)
        #expect(result.stderr.contains("apps[1].accessGroups[1]: malformed access group \"bad group\""))
    }

    @Test func aPolicyHoldingAClientSecretThatOthersMayReadIsRefusedNamingTheChmod() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "secret-policy-\(UUID().uuidString)"
        )
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let file = scratch.appendingPathComponent("kiosk-password.json")
        try Data(contentsOf: Self.policies.appendingPathComponent("kiosk-password.json")).write(to: file)
        for mode in [0o644, 0o640, 0o604] {
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file.path)
            let refused = try await cli.run(["provision", "--policy", file.path])
            #expect(refused.status == 78, "mode \(String(mode, radix: 8)): \(refused.stdout) \(refused.stderr)")
            #expect(
                refused.stderr.contains("chmod 600 \(file.path)") && refused.stderr.contains("nothing was changed"),
                "\(refused.stderr)"
            )
            #expect(!refused.stderr.contains("kiosk-password-secret"), "the secret is in the error")
            #expect(
                !FileManager.default.fileExists(
                    atPath: cli.stateDirectory.appendingPathComponent("keychain.sqlite").path
                )
            )
        }
        // Owner-only: provisioned. A policy without a secret may be readable by all (kiosk.json is 0644).
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        let provisioned = try await cli.run(["provision", "--policy", file.path])
        #expect(provisioned.status == 0, "\(provisioned.stderr)")
    }
}
