import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// deviced takes its socket and state directory safely: never in a directory another user can write,
/// never over something that is not a stale socket, never beside another daemon.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct SocketSafetyTests {
    typealias Daemon = BrokerDaemon

    /// Runs a second deviced to its exit (it should refuse to start): status and standard error.
    static func refusedStart(
        _ daemon: Daemon,
        stateDir: String? = nil,
        socket: String
    ) async throws -> (status: Int32, message: String) {
        let process = try ChildProcess(
            product: "deviced",
            ["--state-dir", stateDir ?? daemon.cli.stateDirectory.path, "--socket", socket]
        )
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
            let mode = attributes[.posixPermissions] as? Int, let owner = attributes[.ownerAccountID] as? NSNumber
        else { return nil }
        return (mode, owner.uint32Value)
    }

    @Test func theSocketGoesInPlaceConnectableAndAStaleOneIsReplaced() async throws {
        let daemon = try await Daemon()
        try await daemon.start()
        let socket = try #require(Self.mode(daemon.socketPath))
        #expect(socket.mode == 0o666 && socket.owner == 0)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: daemon.publicDirectory.path).filter {
            $0.hasPrefix(".socket-")
        }
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
        try FileManager.default.createDirectory(
            at: owned,
            withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o755]
        )
        #expect(chown(owned.path, Daemon.strangerUID, Daemon.strangerUID) == 0)
        let inOwned = try await Self.refusedStart(daemon, socket: owned.appendingPathComponent("broker.sock").path)
        #expect(inOwned.status == 75, "\(inOwned.message)")
        #expect(
            inOwned.message.contains("owned by uid \(Daemon.strangerUID)") && inOwned.message.contains(owned.path),
            "\(inOwned.message)"
        )
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: owned.path).isEmpty,
            "deviced created something in a user's directory"
        )

        let shared = daemon.publicDirectory.appendingPathComponent("world-writable")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: false)
        #expect(chmod(shared.path, 0o1777) == 0)
        let inShared = try await Self.refusedStart(daemon, socket: shared.appendingPathComponent("broker.sock").path)
        #expect(inShared.status == 75 && inShared.message.contains("writable by every user"), "\(inShared.message)")
        await daemon.cleanUp()
    }

    @Test func aSharedStickyDirectoryLikeTmpIsRefusedSuggestingADirectoryOfTheDaemonsOwnNotAChmod() async throws {
        let daemon = try await Daemon()
        let sticky = daemon.publicDirectory.appendingPathComponent("sticky")
        try FileManager.default.createDirectory(at: sticky, withIntermediateDirectories: false)
        #expect(chmod(sticky.path, 0o1777) == 0)
        for directory in ["/tmp", sticky.path] {
            let socket = directory + "/broker-\(UUID().uuidString.prefix(8)).sock"
            let refused = try await Self.refusedStart(daemon, socket: socket)
            #expect(refused.status == 75, "\(refused.message)")
            #expect(
                refused.message.contains(
                    "the socket's directory \(directory) is writable by every user (mode 1777, a shared directory such as /tmp)"
                )
                    && refused.message.contains("install -d -m 0755 /run/myapp, then --socket /run/myapp/broker.sock"),
                "\(refused.message)"
            )
            #expect(
                !refused.message.contains("chmod"),
                "deviced suggests changing a shared directory's mode: \(refused.message)"
            )
            #expect(!FileManager.default.fileExists(atPath: socket))
        }
        // A directory of its own, as suggested, is taken.
        let own = daemon.publicDirectory.appendingPathComponent("myapp")
        let install = try await Command.run(URL(fileURLWithPath: "/usr/bin/install"), ["-d", "-m", "0755", own.path])
        try #require(install.status == 0, "\(install.stderr)")
        let broker = try ChildProcess(
            product: "deviced",
            ["--state-dir", daemon.cli.stateDirectory.path, "--socket", own.appendingPathComponent("broker.sock").path]
        )
        defer { _ = broker.killIfRunning() }
        #expect(await Daemon.waitUntilReady(broker), "\(broker.standardError)")
        _ = broker.send(SIGTERM)
        #expect(await broker.waitForExit(timeout: 20))
        await daemon.cleanUp()
    }

    @Test func aFileADirectoryOrASymlinkAtTheSocketPathIsRefusedAndKept() async throws {
        let daemon = try await Daemon()
        let base = daemon.publicDirectory.path
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: base + "/file.sock"))
        try FileManager.default.createDirectory(atPath: base + "/dir.sock", withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: base + "/link.sock", withDestinationPath: base + "/nowhere")
        for (name, what) in [
            ("file.sock", "a regular file"), ("dir.sock", "a directory"), ("link.sock", "a symbolic link"),
        ] {
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
        let onSocket = try await Self.refusedStart(
            daemon,
            stateDir: other.stateDirectory.path,
            socket: daemon.socketPath
        )
        #expect(onSocket.status == 75, "\(onSocket.message)")
        #expect(
            onSocket.message.contains("another server already listens on \(daemon.socketPath) (pid \(firstPID)"),
            "\(onSocket.message)"
        )
        // The same store, another socket.
        let onStore = try await Self.refusedStart(
            daemon,
            socket: daemon.publicDirectory.appendingPathComponent("second.sock").path
        )
        #expect(onStore.status == 75, "\(onStore.message)")
        #expect(
            onStore.message.contains("another deviced or a key rotation (pid \(firstPID)) holds the state directory"),
            "\(onStore.message)"
        )
        // The first daemon still has its socket and serves.
        let token = try await daemon.victimSilentToken()
        #expect(token.hasPrefix("token cache "), "\(token)")
        #expect(try await daemon.devicectl(as: 0, ["status"]).status == 0)
        await daemon.cleanUp()
    }

    /// Makes the directory `name` in the daemon's public directory, mode `mode`, owned by `owner`.
    static func directory(_ daemon: Daemon, _ name: String, mode: mode_t = 0o755, owner: UInt32 = 0) throws -> URL {
        let made = daemon.publicDirectory.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: made, withIntermediateDirectories: true)
        #expect(chmod(made.path, mode) == 0 && chown(made.path, owner, owner) == 0)
        return made
    }

    @Test func aRootOwnedSocketDirectoryInsideADirectoryAnotherUserOwnsIsRefusedNamingThatDirectory() async throws {
        let daemon = try await Daemon()
        let users = try Self.directory(daemon, "users-tree", owner: Daemon.scannerUID)
        let roots = try Self.directory(daemon, "users-tree/roots")
        let refused = try await Self.refusedStart(daemon, socket: roots.appendingPathComponent("broker.sock").path)
        #expect(refused.status == 75, "\(refused.message)")
        #expect(
            refused.message.contains("\(users.path) is owned by uid \(Daemon.scannerUID)")
                && refused.message.contains("chown root \(users.path)"),
            "\(refused.message)"
        )
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: roots.path).isEmpty,
            "deviced created something below a user's directory"
        )
        // A missing socket directory below the user's is not created either.
        let missing = try await Self.refusedStart(daemon, socket: users.appendingPathComponent("new/broker.sock").path)
        #expect(missing.status == 75 && missing.message.contains("\(users.path) is owned by uid"), "\(missing.message)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: users.path) == ["roots"])
        await daemon.cleanUp()
    }

    @Test func aUserSwappingTheSocketDirectoryForSymlinksWhileDevicedStartsNeverChangesARootFilesMode() async throws {
        let daemon = try await Daemon()
        let users = try Self.directory(daemon, "users-race", owner: Daemon.scannerUID)
        _ = try Self.directory(daemon, "users-race/roots")
        let victim = daemon.publicDirectory.appendingPathComponent("victim")
        try Data("root's own".utf8).write(to: victim)
        #expect(chmod(victim.path, 0o600) == 0)
        // The attacker (the owner of users-race) watches roots; once the daemon made a staging directory there,
        // it makes a twin in a directory of its own whose broker.sock leads to the victim, and swaps roots for a
        // symlink to that directory and back. A chmod or a rename through the path would land on the victim.
        let script = """
            import os, random, sys
            os.chdir(sys.argv[1]); victim = sys.argv[2]
            os.makedirs("evil", exist_ok=True)
            print("ready", flush=True)
            seen = set()
            while True:
                try: names = [n for n in os.listdir("roots") if n.startswith(".socket-") and n not in seen]
                except OSError: continue
                if not names: continue
                seen.update(names)
                for n in names:
                    try:
                        os.makedirs("evil/" + n, exist_ok=True)
                        os.symlink(victim, "evil/" + n + "/broker.sock")
                    except OSError: pass
                for _ in range(random.randrange(4000)): os.stat("roots")  # the daemon binds meanwhile, at a moment unseen
                try:
                    os.rename("roots", "real"); os.symlink("evil", "roots")
                    for _ in range(200): os.stat("real")
                    os.unlink("roots"); os.rename("real", "roots")
                except OSError: pass
            """
        let attacker = try ChildProcess(
            Daemon.setpriv,
            ["--pdeathsig", "KILL"] + Daemon.asUser(Daemon.scannerUID)
                + ["/usr/bin/python3", "-c", script, users.path, victim.path]
        )
        defer { attacker.killIfRunning() }
        try #require(
            await attacker.waitForLine(timeout: 20) { $0 == "ready" } != nil,
            "the attacker did not start: \(attacker.standardError)"
        )
        for start in 1...20 {
            let refused = try await Self.refusedStart(
                daemon,
                socket: users.appendingPathComponent("roots/broker.sock").path
            )
            #expect(
                refused.status == 75 && refused.message.contains("\(users.path) is owned by uid \(Daemon.scannerUID)"),
                "start \(start): \(refused.message)"
            )
        }
        #expect(!attacker.hasExited, "the attacker stopped early: \(attacker.standardError)")
        attacker.killIfRunning()
        let after = try #require(Self.mode(victim.path))
        #expect(after.mode == 0o600 && after.owner == 0, "the victim's mode changed: \(String(after.mode, radix: 8))")
        #expect(try String(contentsOf: victim, encoding: .utf8) == "root's own")
        await daemon.cleanUp()
    }

    @Test func aStateDirectoryAnotherUserOwnsOrIsInsideOfIsRefusedByProvisionAndDevicedChangingNothing() async throws {
        let daemon = try await Daemon()
        let theirs = try Self.directory(daemon, "their-state", mode: 0o700, owner: Daemon.scannerUID)
        let users = try Self.directory(daemon, "users-state", owner: Daemon.scannerUID)
        let inside = try Self.directory(daemon, "users-state/state", mode: 0o700)
        for (state, component) in [(theirs, theirs), (inside, users)] {
            let provision = try await DevicectlRunner.execute(
                DevicectlRunner.productsDirectory.appendingPathComponent("devicectl"),
                ["provision", "--policy", DevicectlRunner.policy("kiosk.json"), "--state-dir", state.path]
            )
            #expect(provision.status == 78, "\(state.path): \(provision.stderr)")
            #expect(
                provision.stderr.contains("\(component.path) is owned by uid \(Daemon.scannerUID)")
                    && provision.stderr.contains("--state-dir"),
                "\(provision.stderr)"
            )
            let started = try await Self.refusedStart(
                daemon,
                stateDir: state.path,
                socket: daemon.publicDirectory.appendingPathComponent("state.sock").path
            )
            #expect(
                started.status == 78
                    && started.message.contains("\(component.path) is owned by uid \(Daemon.scannerUID)"),
                "\(started.message)"
            )
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: state.path).isEmpty,
                "something was written in \(state.path)"
            )
        }
        #expect(Self.mode(daemon.publicDirectory.appendingPathComponent("state.sock").path) == nil)
        await daemon.cleanUp()
    }

    @Test func aSymlinkPlantedAtTheAccountChangeSignalIsNotFollowed() async throws {
        let daemon = try await Daemon()
        let victim = daemon.publicDirectory.appendingPathComponent("victim")
        try Data("root's own".utf8).write(to: victim)
        #expect(chmod(victim.path, 0o600) == 0)
        let signal = daemon.cli.stateDirectory.appendingPathComponent("account-changes.signal")
        try? FileManager.default.removeItem(at: signal)
        try FileManager.default.createSymbolicLink(at: signal, withDestinationURL: victim)
        // A change of mode rings the signal: the link is left alone, the victim unchanged, the command fine.
        let changed = try await daemon.cli.run([
            "provision", "--policy", DevicectlRunner.policy("personal.json"), "--force",
        ])
        #expect(changed.status == 0, "\(changed.stderr)")
        #expect(try String(contentsOf: victim, encoding: .utf8) == "root's own")
        #expect(Self.mode(victim.path)?.mode == 0o600)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: signal.path) == victim.path)
        await daemon.cleanUp()
    }
}
