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
}
