import Foundation
import ProcessTestSupport
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Oversized input is refused with its limit named and nothing changed; logging goes to standard error
/// at the chosen level and no further; a store that belongs to another user says so.
@Suite(.tags(.integration, .needsRoot))
struct InputAndLoggingCLITests {
    static let kiosk = DevicectlRunner.policy("kiosk.json")
    static let scanner = "com.contoso.kiosk.scanner"

    @Test func aPolicyFileOverOneMebibyteIsRefusedWithExit65AndTheDeviceIsUnchanged() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        var document = try Data(contentsOf: URL(fileURLWithPath: Self.kiosk))
        document.append(Data(repeating: UInt8(ascii: " "), count: (1 << 20) + 1 - document.count))
        let huge = try cli.writeFile("huge.json", document)
        let refused = try await cli.run(["provision", "--policy", huge])
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("1 MiB"), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty)
        let info = try await cli.json(["info", "--json"]) as? [String: Any]
        #expect(info?["mode"] as? String == "private", "an oversized policy provisioned the device")
        // The same document one byte shorter is accepted.
        try cli.writeFile("huge.json", document.dropLast())
        let accepted = try await cli.run(["provision", "--policy", huge])
        #expect(accepted.status == 0, "\(accepted.stderr)")
    }

    @Test func aCacheImportOverSixteenMebibytesIsRefusedWithExit65() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        #expect(try await cli.run(["provision", "--policy", Self.kiosk]).status == 0)
        var document = Data(#"{"AccessToken": {}}"#.utf8)
        document.append(Data(repeating: UInt8(ascii: " "), count: (16 << 20) + 1 - document.count))
        let file = try cli.writeFile("cache.json", document)
        let refused = try await cli.run(["cache", "import", "--app", Self.scanner, file])
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("16 MiB"), "\(refused.stderr)")
    }

    @Test func aDeviceNameOverTheLimitIsRefusedWithoutEchoingIt() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        var policy = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: Self.kiosk))) as? [String: Any]
        )
        var device = try #require(policy["device"] as? [String: Any])
        device["name"] = String(repeating: "x", count: 200_000)
        policy["device"] = device
        let file = try cli.writeFile("long-name.json", try JSONSerialization.data(withJSONObject: policy))
        let refused = try await cli.run(["provision", "--policy", file])
        #expect(refused.status == 65)
        #expect(refused.stderr.contains("device.name") && refused.stderr.contains("255"), "\(refused.stderr)")
        #expect(refused.stderr.count < 1_000, "the error echoes the device name: \(refused.stderr.count) characters")
    }

    @Test func logsGoToStandardErrorAtTheChosenLevelOnly() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        // Default: warnings only, so a successful command writes nothing to standard error.
        let quiet = try await cli.run(["provision", "--policy", Self.kiosk])
        #expect(quiet.status == 0)
        #expect(quiet.stderr.isEmpty, "\(quiet.stderr)")

        let verbose = try await cli.run(["info", "--log-level", "debug"])
        #expect(verbose.status == 0)
        #expect(
            verbose.stderr.contains("debug") && verbose.stderr.contains("keychain store opened"),
            "\(verbose.stderr)"
        )
        #expect(!verbose.stdout.contains("keychain store opened"), "logs leaked into standard output")

        let fromEnvironment = try await cli.run(
            ["provision", "--policy", Self.kiosk, "--force"],
            environment: ["DEVICECTL_LOG_LEVEL": "debug"]
        )
        #expect(fromEnvironment.stderr.contains("device policy applied"), "\(fromEnvironment.stderr)")

        let wrong = try await cli.run(["info", "--log-level", "chatty"])
        #expect(wrong.status == 64, "\(wrong.stderr)")
    }

    /// Run as root (as CI is): the store is root's, and `nobody` is told whose it is instead of
    /// "cannot create …: Permission denied".
    @Test(.enabled(if: getuid() == 0, "needs root to run devicectl as another user"))
    func aStoreOwnedByAnotherUserNamesItsOwnerAndTheCaller() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        #expect(try await cli.run(["provision", "--policy", Self.kiosk]).status == 0)
        let devicectl = DevicectlRunner.productsDirectory.appendingPathComponent("devicectl").path
        let asNobody = try await DevicectlRunner.execute(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            [
                "--reuid=65534", "--regid=65534", "--clear-groups", devicectl, "info", "--state-dir",
                cli.stateDirectory.path,
            ]
        )
        #expect(asNobody.status == 46 || asNobody.status == 74, "\(asNobody.status): \(asNobody.stderr)")
        #expect(asNobody.stderr.contains("owned by root (uid 0)"), "\(asNobody.stderr)")
        #expect(asNobody.stderr.contains("uid 65534"), "\(asNobody.stderr)")
        #expect(!asNobody.stderr.contains("cannot create"), "\(asNobody.stderr)")
    }
}
