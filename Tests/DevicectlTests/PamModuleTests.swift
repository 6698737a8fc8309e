import Foundation
import PamTestSupport
import ProcessTestSupport
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The PAM module pam_sharedmode with real PAM (pamtester, and a small PAM application in C), its real
/// helper, and what it must never do to the process it is loaded into: start a thread, leave a child, wait
/// without bound. These cases need no broker: a local account's name, deviced not running, a listener
/// not run by root, bad arguments, a helper that hangs.
@Suite(.serialized, .tags(.integration, .needsRoot)) struct PamModuleTests {
    /// A name no local account has: a worker's.
    static let worker = "worker1@contoso.example"
    /// pam_strerror(PAM_AUTHINFO_UNAVAIL), as pamtester prints it.
    static let authInfoUnavailable = "Authentication service cannot retrieve authentication info"

    /// A scratch directory every user may enter.
    static func scratch() throws -> URL {
        let directory = URL(fileURLWithPath: "/tmp/pam-test-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(
            at: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755]
        )
        return directory
    }

    @Test func theModuleLinksOnlyLibpamAndLibcAndTheHelperNoNIO() async throws {
        try await PamStack.build()  // tools/build-pam refuses a module needing more, or that may start a thread
        let symbols = try await Command.run(URL(fileURLWithPath: "/usr/bin/nm"), ["-C", PamStack.helper])
        try #require(symbols.status == 0, "\(symbols.stderr)")
        #expect(!symbols.stdout.contains("NIOCore"), "the helper links SwiftNIO")
        #expect(!symbols.stdout.contains("sqlite3_open"), "the helper links the store")
    }

    /// An administrator's local account passes through pam_sharedmode (PAM_USER_UNKNOWN) to pam_unix,
    /// which alone decides: the right password signs in, a wrong one does not. The module's socket names
    /// nothing: had it called the broker, `default=die` would have failed the stack.
    @Test func aLocalAccountsNameGoesToTheNextModule() async throws {
        try await PamStack.build()
        let user = "pamtest\(UInt32.random(in: 10000...99999))"
        let password = "Local-\(UUID().uuidString.prefix(12))"
        // A uid of its own: the policies' apps run as 1001 and 1002, which useradd would hand out next.
        let added = PamStack.accountTool(
            "/usr/sbin/useradd",
            ["-M", "-s", "/usr/sbin/nologin", "-K", "UID_MIN=20000", "-K", "GID_MIN=20000", user]
        )
        try #require(added == 0, "useradd exited \(added)")
        defer { PamStack.accountTool("/usr/sbin/userdel", [user]) }
        let changed = try await Command.run(
            URL(fileURLWithPath: "/usr/sbin/chpasswd"),
            [],
            stdin: "\(user):\(password)\n"
        )
        try #require(changed.status == 0, "chpasswd failed: \(changed.stderr)")
        let stack = try PamStack(
            arguments: [],
            socket: "/nonexistent/broker.sock",
            rest: ["auth required pam_unix.so nodelay"]
        )
        defer { stack.remove() }

        let right = try await stack.pamtester(user, stdin: password + "\n")
        #expect(right.status == 0, "stdout: \(right.stdout) stderr: \(right.stderr)")
        #expect(right.stdout.contains("successfully authenticated"), "\(right.stdout)")
        #expect(!(right.stdout + right.stderr).contains("/nonexistent/broker.sock"))
        let wrong = try await stack.pamtester(user, stdin: "not-\(password)\n")
        #expect(wrong.status != 0, "a wrong local password signed in: \(wrong.stdout)")
        #expect(wrong.stderr.contains("Authentication failure"), "\(wrong.stderr)")
    }

    /// deviced not running: PAM_AUTHINFO_UNAVAIL, and the greeter's message names the socket.
    @Test func devicedNotRunningIsAuthInfoUnavailableNamingTheSocket() async throws {
        try await PamStack.build()
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = directory.appendingPathComponent("broker.sock").path
        let stack = try PamStack(arguments: [], socket: socket)
        defer { stack.remove() }
        let result = try await stack.pamtester(Self.worker)
        #expect(result.status != 0)
        #expect(result.stderr.contains(Self.authInfoUnavailable), "\(result.stderr)")
        #expect(result.stderr.contains("nothing listens on \(socket)"), "\(result.stderr)")
    }

    /// A listener that is not root's gets nothing: the helper checks SO_PEERCRED before it sends a byte.
    @Test func aBrokerNotRunByRootIsRefusedBeforeAnythingIsSent() async throws {
        try await PamStack.build()
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let socketDirectory = directory.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: socketDirectory, withIntermediateDirectories: false)
        _ = chown(socketDirectory.path, BrokerDaemon.strangerUID, BrokerDaemon.strangerUID)
        let socket = socketDirectory.appendingPathComponent("broker.sock").path
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX)
            s.bind(sys.argv[1])
            s.listen(1)
            print("listening", flush=True)
            c, _ = s.accept()
            c.settimeout(120)
            print("received", len(c.recv(65536)), flush=True)
            """
        let impostor = try ChildProcess(
            BrokerDaemon.setpriv,
            BrokerDaemon.asUser(BrokerDaemon.strangerUID) + ["/usr/bin/python3", "-c", script, socket]
        )
        defer { _ = impostor.killIfRunning() }
        try #require(
            await impostor.waitForLine(timeout: ChildProcess.shortestWait) { $0 == "listening" } != nil,
            "\(impostor.standardError)"
        )
        let stack = try PamStack(arguments: [], socket: socket)
        defer { stack.remove() }
        let result = try await stack.pamtester(Self.worker, stdin: "never-sent\n")
        #expect(result.status != 0)
        #expect(result.stderr.contains(Self.authInfoUnavailable), "\(result.stderr)")
        #expect(
            result.stderr.contains("\(socket) was refused: it runs as uid \(BrokerDaemon.strangerUID), not root"),
            "\(result.stderr)"
        )
        #expect(await impostor.waitForExit(timeout: ChildProcess.shortestWait))
        #expect(impostor.lines.contains("received 0"), "the helper sent something: \(impostor.lines)")
    }

    /// An argument the module does not know fails the stack as a misconfiguration (PAM_SERVICE_ERR)
    /// rather than being ignored.
    @Test func anUnknownArgumentIsAServiceError() async throws {
        try await PamStack.build()
        for argument in ["flow=browser", "timeout=0", "helper=relative/path", "colour=blue"] {
            let stack = try PamStack(arguments: [argument], socket: "/nonexistent/broker.sock")
            defer { stack.remove() }
            let result = try await stack.pamtester(Self.worker)
            #expect(result.status != 0, "\(argument)")
            #expect(result.stderr.contains("Error in service module"), "\(argument): \(result.stderr)")
        }
    }

    /// A helper that hangs is killed at the module's cap (`timeout=`) and reaped: the host process gets
    /// PAM_AUTHINFO_UNAVAIL with a message, has one thread, no child left (no zombie), and the helper's
    /// process is gone.
    @Test func aHangingHelperIsKilledAndReapedAndNoThreadIsLeft() async throws {
        try await PamStack.build()
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let pidFile = directory.appendingPathComponent("helper.pid").path
        // Through `script` (a copy `cp` made): a helper this process wrote itself could not be executed while a
        // child another test forks still holds the write descriptor (ETXTBSY: "stopped unexpectedly").
        let helper = try Self.script("echo $$ > \(pidFile)\nexec sleep 3600", in: directory)
        let stack = try PamStack(arguments: ["timeout=3"], socket: "/nonexistent/broker.sock", helper: helper)
        defer { stack.remove() }

        let result = try await stack.host(Self.worker, answer: "unused")
        try #require(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("result \(Self.authInfoUnavailable)"), "\(lines)")
        #expect(lines.contains { $0.contains("took longer than 3 seconds") }, "\(lines)")
        #expect(lines.contains("threads 1"), "\(lines)")
        #expect(lines.contains("children none") && lines.contains("descriptors kept"), "\(lines)")
        let pid = try #require(
            pid_t(try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
        )
        #expect(kill(pid, 0) != 0 && errno == ESRCH, "the hanging helper \(pid) still runs")
    }

    /// Writes an executable helper script into `directory`.
    static func script(_ body: String, in directory: URL) throws -> String {
        let path = directory.appendingPathComponent("helper-\(UUID().uuidString.prefix(6))").path
        // Written here, executed as a copy a `cp` process made: a write descriptor of this process, inherited
        // by a child another test forks meanwhile, would make the module's exec of the file fail (ETXTBSY).
        try "#!/bin/sh\n\(body)\n".write(toFile: path + ".source", atomically: true, encoding: .utf8)
        try ExecutableCopy.copy(from: path + ".source", to: path)
        return path
    }

    /// The module's side of the line protocol, against a helper scripted in sh: the prompt relayed to the
    /// application's conversation and its answer sent back, the info and error messages shown, PAM_USER
    /// set to the session's user, the helper started with a clean environment and its arguments.
    @Test func theConversationIsRelayedAndTheSessionsUserSet() async throws {
        try await PamStack.build()
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let helper = try Self.script(
            """
            echo "prompt-echo-off Password: " >&3
            read -r answer <&3
            [ "$answer" = "response s3cret word" ] && echo "info answer received" >&3 || echo "info wrong: $answer" >&3
            echo "info args: $*" >&3
            echo "info environment: $(env | grep -v '^PWD=' | sort | tr '\\n' ' ')" >&3
            echo "error shown as an error" >&3
            echo "set-user kiosk-session-user" >&3
            echo "set-worker worker1" >&3
            echo "set-correlation c-1" >&3
            echo "result PAM_SUCCESS" >&3
            """,
            in: directory
        )
        let stack = try PamStack(arguments: ["app=com.contoso.kiosk.scanner"], socket: "/run/x.sock", helper: helper)
        defer { stack.remove() }
        let result = try await stack.host(Self.worker, answer: "s3cret word")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("message 1 Password: "), "\(lines)")
        #expect(lines.contains("message 4 answer received"), "\(lines)")
        #expect(
            lines.contains(
                "message 4 args: authenticate --socket /run/x.sock --service \(stack.service) --user \(Self.worker) "
                    + "--app com.contoso.kiosk.scanner"
            ),
            "\(lines)"
        )
        #expect(
            lines.contains {
                $0.hasPrefix("message 4 environment: LC_ALL=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin ")
            },
            "\(lines)"
        )
        #expect(lines.contains("message 3 shown as an error"), "\(lines)")
        #expect(lines.contains("result Success"), "\(lines)")
        #expect(lines.contains("user kiosk-session-user"), "\(lines)")
        #expect(lines.contains("threads 1") && lines.contains("children none"), "\(lines)")
        #expect(lines.contains("descriptors kept"), "\(lines)")
    }

    /// A helper that breaks the protocol is not believed: a success without the session's user, an
    /// unknown line, a line over the limit, an exit without a result, a program that cannot run.
    @Test func aHelperThatBreaksTheProtocolFailsTheSignIn() async throws {
        try await PamStack.build()
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let longLine = String(repeating: "x", count: 5000)
        let cases: [(body: String, message: String?)] = [
            ("echo 'result PAM_SUCCESS' >&3", nil),
            ("echo 'set-user kiosk' >&3; echo 'grant everything' >&3; echo 'result PAM_SUCCESS' >&3", nil),
            ("echo 'info \(longLine)' >&3; echo 'result PAM_SUCCESS' >&3", nil),
            ("exit 3", "stopped unexpectedly"),
        ]
        for (body, message) in cases {
            let helper = try Self.script(body, in: directory)
            let stack = try PamStack(arguments: [], socket: nil, helper: helper)
            defer { stack.remove() }
            let result = try await stack.host(Self.worker, answer: "unused")
            let lines = result.stdout.split(separator: "\n").map(String.init)
            #expect(lines.contains("result \(Self.authInfoUnavailable)"), "\(body.prefix(80)): \(lines)")
            #expect(lines.contains("user \(Self.worker)"), "\(lines)")
            #expect(lines.contains("children none") && lines.contains("descriptors kept"), "\(lines)")
            if let message { #expect(lines.contains { $0.contains(message) }, "\(lines)") }
        }
        let missing = try PamStack(arguments: [], socket: nil, helper: directory.appendingPathComponent("none").path)
        defer { missing.remove() }
        let result = try await missing.host(Self.worker, answer: "unused")
        #expect(result.stdout.contains("result \(Self.authInfoUnavailable)"), "\(result.stdout)")
    }

    /// The session phase's side of the protocol: open_session and close_session run the helper with the
    /// logind session id (pam_env standing in for pam_systemd), the sign-in's correlation id and the
    /// session's user, only after this module authenticated; an administrator's session is not the module's.
    @Test func theSessionPhasePassesTheSessionAndTheSignInToTheHelper() async throws {
        try await PamStack.build()
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let helper = try Self.script(
            """
            if [ "$1" = authenticate ]; then
              printf 'set-user kiosk-session-user\\nset-worker worker1\\nset-correlation c-42\\nresult PAM_SUCCESS\\n' >&3
            else
              echo "info $*" >&3; echo "result PAM_SUCCESS" >&3
            fi
            """,
            in: directory
        )
        let environment = try PamStack.sessionEnvironment("s-7")
        defer { try? FileManager.default.removeItem(at: environment.file) }
        let stack = try PamStack(arguments: [], socket: nil, helper: helper, session: [environment.line])
        defer { stack.remove() }
        let result = try await stack.pamtester(Self.worker, ["authenticate", "open_session", "close_session"])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(
            result.stdout.contains(
                "open-session --service \(stack.service) --session-id s-7 --correlation-id c-42 --user kiosk-session-user"
            ),
            "\(result.stdout)"
        )
        #expect(
            result.stdout.contains(
                "close-session --service \(stack.service) --session-id s-7 --user kiosk-session-user"
            ),
            "\(result.stdout)"
        )
        // Without the module's sign-in (an administrator's login) the session phase does not call the helper.
        let alone = try await stack.pamtester(Self.worker, ["open_session", "close_session"])
        #expect(alone.status == 0, "\(alone.stderr)")
        #expect(!alone.stdout.contains("open-session"), "\(alone.stdout)")
    }

    /// The password the module relays leaves no copy in the host process: the conversation's answer is
    /// wiped before it is freed, and so are the module's line buffers (the host wipes its own). The scan
    /// reads the host's writable memory, freed heap chunks included, after pam_end.
    @Test func theRelayedPasswordLeavesNoCopyInTheHostProcess() async throws {
        try await PamStack.build()
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: directory) }
        let password = "pam-memory-\(UUID().uuidString)"
        let answerFile = directory.appendingPathComponent("answer")
        try (password + "\n").write(to: answerFile, atomically: true, encoding: .utf8)
        let helper = try Self.script(
            """
            echo "prompt-echo-off Password: " >&3
            read -r answer <&3
            [ "$answer" = "response \(password)" ] && echo "info received" >&3
            printf 'set-user kiosk\\nset-correlation c-1\\nresult PAM_SUCCESS\\n' >&3
            """,
            in: directory
        )
        let stack = try PamStack(arguments: [], socket: nil, helper: helper)
        defer { stack.remove() }
        let host = try ChildProcess(
            URL(fileURLWithPath: PamStack.host),
            [stack.service, Self.worker, "@" + answerFile.path],
            environment: ["PAM_HOST_PAUSE": "1"]
        )
        defer { _ = host.killIfRunning() }
        try #require(
            await host.waitForLine(timeout: ChildProcess.shortestWait) { $0 == "paused" } != nil,
            "\(host.standardOutput) \(host.standardError)"
        )
        #expect(host.lines.contains("message 4 received"), "the helper did not get the password: \(host.lines)")
        #expect(host.lines.contains("result Success"), "\(host.lines)")
        let scan = try ProcessMemory.occurrences(
            // The password's tail: a freed chunk's first 16 bytes hold the allocator's own pointers.
            of: [Data(password.utf8.suffix(28)), Data(Self.worker.utf8)],
            inWritableMemoryOf: host.pid
        )
        #expect(scan.counts[1] > 0, "the scan found not even the user's name: \(scan)")
        #expect(scan.counts[0] == 0, "the password is in the host's memory \(scan.counts[0]) times")
    }
}
