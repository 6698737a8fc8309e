import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// deviced takes its socket and state directory safely: never in a directory another user can write,
/// never over something that is not a stale socket, never beside another daemon.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct SocketSafetyTests {
    typealias Daemon = BrokerDaemon

    /// Runs a second deviced to its exit (it should refuse to start): status and standard error.
    static func refusedStart(_ daemon: Daemon, stateDir: String? = nil, socket: String) async throws -> (status: Int32, message: String) {
        let process = try ChildProcess(product: "deviced", ["--state-dir", stateDir ?? daemon.cli.stateDirectory.path, "--socket", socket])
        guard await process.waitForExit(timeout: 20) else {
            _ = process.killIfRunning()
            Issue.record("deviced started where it should have refused: \(process.standardError)")
            return (-1, process.standardError)
        }
        return (process.status, process.standardError)
    }

    /// The permission bits and owner of what is at `path` (the link itself for a symlink), nil if nothing.
    static func mode(_ path: String) -> (mode: Int, owner: UInt32)? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
              let mode = attributes[.posixPermissions] as? Int, let owner = attributes[.ownerAccountID] as? NSNumber else { return nil }
        return (mode, owner.uint32Value)
    }

    @Test func theSocketGoesInPlaceConnectableAndAStaleOneIsReplaced() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        let socket = try #require(Self.mode(daemon.socketPath))
        #expect(socket.mode == 0o666 && socket.owner == 0)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: daemon.publicDirectory.path).filter { $0.hasPrefix(".socket-") }
        #expect(leftovers.isEmpty, "staging directories left: \(leftovers)")
        // Killed outright, the daemon leaves its socket behind: the next one replaces the stale socket.
        _ = daemon.process?.send(SIGKILL)
        _ = await daemon.process?.waitForExit(timeout: 10)
        #expect(Self.mode(daemon.socketPath) != nil)
        try await daemon.start()
        #expect(try await daemon.devicectl(as: 0, ["status"]).status == 0)
        // A graceful stop removes its own socket.
        #expect(await daemon.stop())
        #expect(Self.mode(daemon.socketPath) == nil, "the socket outlived its daemon")
        await daemon.cleanUp()
    }

    @Test func aDirectoryAnotherUserOwnsOrMayWriteIsRefused() async throws {
        let daemon = try await Daemon()
        let owned = daemon.publicDirectory.appendingPathComponent("users-own")
        try FileManager.default.createDirectory(at: owned, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        #expect(chown(owned.path, Daemon.strangerUID, Daemon.strangerUID) == 0)
        let inOwned = try await Self.refusedStart(daemon, socket: owned.appendingPathComponent("broker.sock").path)
        #expect(inOwned.status == 75, "\(inOwned.message)")
        #expect(inOwned.message.contains("owned by uid \(Daemon.strangerUID)") && inOwned.message.contains(owned.path), "\(inOwned.message)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: owned.path).isEmpty, "deviced created something in a user's directory")

        let shared = daemon.publicDirectory.appendingPathComponent("world-writable")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: false)
        #expect(chmod(shared.path, 0o1777) == 0)
        let inShared = try await Self.refusedStart(daemon, socket: shared.appendingPathComponent("broker.sock").path)
        #expect(inShared.status == 75 && inShared.message.contains("writable by every user"), "\(inShared.message)")
        await daemon.cleanUp()
    }

    @Test func aFileADirectoryOrASymlinkAtTheSocketPathIsRefusedAndKept() async throws {
        let daemon = try await Daemon()
        let base = daemon.publicDirectory.path
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: base + "/file.sock"))
        try FileManager.default.createDirectory(atPath: base + "/dir.sock", withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: base + "/link.sock", withDestinationPath: base + "/nowhere")
        for (name, what) in [("file.sock", "a regular file"), ("dir.sock", "a directory"), ("link.sock", "a symbolic link")] {
            let path = base + "/" + name
            let refused = try await Self.refusedStart(daemon, socket: path)
            #expect(refused.status == 75, "\(name): \(refused.message)")
            #expect(refused.message.contains("\(path) is \(what), not a socket"), "\(name): \(refused.message)")
            #expect(Self.mode(path) != nil, "\(name) was removed")
        }
        #expect(try String(contentsOfFile: base + "/file.sock", encoding: .utf8) == "keep me")
        await daemon.cleanUp()
    }

    @Test func aSecondDaemonOnTheLiveSocketOrTheSameStateDirectoryRefusesAndTheFirstKeepsServing() async throws {
        let daemon = try await Daemon()
        try await daemon.signWorkerIn()
        try await daemon.start()
        let firstPID = try #require(daemon.process?.pid)
        let other = DevicectlRunner()
        defer { other.cleanUp() }
        #expect(try await other.run(["provision", "--policy", DevicectlRunner.policy("kiosk.json")]).status == 0)
        // Another store, the same (live) socket.
        let onSocket = try await Self.refusedStart(daemon, stateDir: other.stateDirectory.path, socket: daemon.socketPath)
        #expect(onSocket.status == 75, "\(onSocket.message)")
        #expect(onSocket.message.contains("another server already listens on \(daemon.socketPath) (pid \(firstPID)"), "\(onSocket.message)")
        // The same store, another socket.
        let onStore = try await Self.refusedStart(daemon, socket: daemon.publicDirectory.appendingPathComponent("second.sock").path)
        #expect(onStore.status == 75, "\(onStore.message)")
        #expect(onStore.message.contains("another deviced or a key rotation (pid \(firstPID)) holds the state directory"), "\(onStore.message)")
        // The first daemon still has its socket and serves.
        let token = try await daemon.victimSilentToken()
        #expect(token.hasPrefix("token cache "), "\(token)")
        #expect(try await daemon.devicectl(as: 0, ["status"]).status == 0)
        await daemon.cleanUp()
    }
}
