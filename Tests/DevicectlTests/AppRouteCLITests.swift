import Foundation
import ProcessTestSupport
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// devicectl's one way in for app commands: an app's user goes through the broker only, and with none it is
/// told which socket, why and how to start the broker, with nothing created; root's `--app` commands act for
/// the app on the store, a running broker or not.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct AppRouteCLITests {
    typealias Daemon = BrokerDaemon

    /// The app commands an app's user runs, each of which once fell back to a store of the user's own.
    static let appCommands: [[String]] = [
        ["account"], ["account", "--all"], ["token", "--scopes", "User.Read"], ["signin"], ["switch"],
        ["call", "--scopes", "User.Read", "userinfo"],
        ["keychain", "find-generic-password", "--service", "printer", "--account", "pin"], ["keychain", "list"],
        ["activity"], ["account", "--follow"],
    ]

    /// A home for the scanner app's user, writable by it (a fallback store would be created in it), with
    /// devicectl copied in; removed by the caller.
    static func appHome() throws -> (home: URL, devicectl: String) {
        let home = URL(fileURLWithPath: "/tmp/devicectl-app-home-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(
            at: home,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755]
        )
        #expect(chown(home.path, Daemon.scannerUID, Daemon.scannerUID) == 0)
        let devicectl = home.appendingPathComponent("devicectl").path
        try ExecutableCopy.copy(
            from: DevicectlRunner.productsDirectory.appendingPathComponent("devicectl").path,
            to: devicectl
        )
        return (home, devicectl)
    }

    /// A Unix socket at `path` that nothing accepts on (bound, never listened on): a stopped broker's.
    static func staleSocket(_ path: String) throws {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(bound == 0, "cannot bind \(path): errno \(errno)")
    }

    @Test func anAppsUserWithNoBrokerIsToldTheSocketTheCauseAndTheFixAndNothingIsCreated() async throws {
        let (home, devicectl) = try Self.appHome()
        defer { try? FileManager.default.removeItem(at: home) }
        let state = home.appendingPathComponent("state")
        let closed = home.appendingPathComponent("closed")  // root's, 0700: the app's uid may not search it
        try FileManager.default.createDirectory(
            at: closed,
            withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700]
        )
        let stale = home.appendingPathComponent("stale.sock").path
        try Self.staleSocket(stale)
        #expect(chown(stale, Daemon.scannerUID, Daemon.scannerUID) == 0)
        let sockets: [(path: String, cause: String)] = [
            (home.appendingPathComponent("no-broker/broker.sock").path, "does not exist"),
            (home.appendingPathComponent("broker.sock").path, "nothing is there"),
            (stale, "nothing accepts connections on it"),
            (closed.appendingPathComponent("broker.sock").path, "may not search the directory \(closed.path)"),
        ]
        for (socket, cause) in sockets {
            let environment = [
                "HOME": home.path, "XDG_STATE_HOME": state.path, "DEVICECTL_SOCKET": socket, "DEVICECTL_STATE_DIR": "",
            ]
            for command in Self.appCommands {
                let run = try await Command.run(
                    Daemon.setpriv,
                    Daemon.asUser(Daemon.scannerUID) + [devicectl] + command,
                    environment: environment
                )
                #expect(run.status == 69, "\(command) at \(socket): \(run.status) \(run.stdout) \(run.stderr)")
                #expect(run.stdout.isEmpty, "\(command): \(run.stdout)")
                #expect(
                    run.stderr.contains(socket) && run.stderr.contains(cause),
                    "\(command) at \(socket): \(run.stderr)"
                )
                #expect(run.stderr.contains("nothing was created"), "\(command): \(run.stderr)")
                if cause != "may not search the directory \(closed.path)" {
                    #expect(
                        run.stderr.contains("deviced --socket \(socket)"),
                        "\(command) is not told how to start the broker: \(run.stderr)"
                    )
                } else {
                    #expect(run.stderr.contains("chmod o+x \(closed.path)"), "\(command): \(run.stderr)")
                }
            }
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: home.path).sorted()
        #expect(left == ["closed", "devicectl", "stale.sock"], "devicectl created \(left)")
        #expect(!FileManager.default.fileExists(atPath: state.path), "a store of the app's user's own was created")
    }

    @Test func rootsAppCommandsActForTheAppOnTheStoreWhileTheBrokerRunsAndTheAppSeesItThroughTheBroker() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        // Root: --app on the store the broker serves, not through the broker (which never acts for another app).
        let added = try await daemon.cli.run(
            [
                "keychain", "add-generic-password", "--app", Daemon.scanner, "--service", "printer",
                "--account", "pin", "--secret-stdin",
            ],
            stdin: "4711"
        )
        #expect(added.status == 0, "\(added.stderr)")
        let account = try await daemon.cli.run(["account", "--app", Daemon.scanner])
        #expect(
            account.status == 0 && account.stdout == "current: none\nprevious: none\n",
            "\(account.stdout) \(account.stderr)"
        )
        // The scanner's own user, through the broker, finds what root added for it; the timeclock does not.
        let found = try await daemon.devicectl(
            as: Daemon.scannerUID,
            [
                "keychain", "find-generic-password", "--service", "printer",
                "--account", "pin", "--print-secret",
            ]
        )
        #expect(found.status == 0 && found.stdout.contains("secret: 4711"), "\(found.stdout) \(found.stderr)")
        let other = try await daemon.devicectl(
            as: Daemon.timeclockUID,
            [
                "keychain", "find-generic-password", "--service", "printer",
                "--account", "pin",
            ]
        )
        #expect(other.status == 44, "\(other.stdout) \(other.stderr)")
        // An app's user naming another app is refused: an app acts only as itself.
        let posing = try await daemon.devicectl(as: Daemon.timeclockUID, ["keychain", "list", "--app", Daemon.scanner])
        #expect(posing.status == 77 && posing.stderr.contains("may act only as itself"), "\(posing.stderr)")
        await daemon.cleanUp()
    }
}
