public import Foundation
public import ProcessTestSupport
import Testing

/// The PAM module as the tests use it: built by tools/build-pam, its helper the built product, a PAM
/// service of the test's own in /etc/pam.d (a unique name, removed by `remove()`), and pamtester or
/// Tests/PamHost's host program run against it. Shared by the suites that drive the module (DevicectlTests'
/// against a real deviced, SharedDeviceTests' against the broker served in the test's process).
public struct PamStack {
    public static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    /// Where the tests build the module and the host program.
    public static let buildDirectory = packageRoot.appendingPathComponent(".build/pam-tests")
    public static var module: String { buildDirectory.appendingPathComponent("pam_sharedmode.so").path }
    public static var host: String { buildDirectory.appendingPathComponent("pam-host").path }
    public static var helper: String {
        ChildProcess.productsDirectory.appendingPathComponent("sharedmode-pam-helper").path
    }

    /// Builds the module with tools/build-pam (which also checks its links and exports) and the host,
    /// once per test run (the suites run in parallel).
    public static func build() async throws {
        let failure = await built.value
        try #require(failure == nil, "\(failure ?? "")")
    }

    /// The build's failure, nil once both are built.
    private static let built = Task<String?, Never> {
        do {
            let module = try await Command.run(
                URL(fileURLWithPath: "/bin/bash"),
                [packageRoot.appendingPathComponent("tools/build-pam").path, Self.module]
            )
            guard module.status == 0 else { return "tools/build-pam failed: \(module.stderr)" }
            let host = try await Command.run(
                URL(fileURLWithPath: "/usr/bin/cc"),
                [
                    "-Wall", "-Werror", packageRoot.appendingPathComponent("Tests/PamHost/pam-host.c").path, "-o",
                    Self.host, "-lpam",
                ]
            )
            return host.status == 0 ? nil : "cannot build the PAM host: \(host.stderr)"
        } catch {
            return "cannot build the PAM module: \(error)"
        }
    }

    /// The service's name (its file in /etc/pam.d).
    public let service: String
    public var file: String { "/etc/pam.d/\(service)" }

    /// Writes a service whose auth phase is pam_sharedmode (with `arguments`, and `socket=`/`helper=`
    /// unless given) falling through to `rest` for local accounts; `session` runs before the module's
    /// session line (where pam_systemd would).
    public init(
        arguments: [String],
        socket: String?,
        helper: String = PamStack.helper,
        rest: [String] = [],
        session: [String] = []
    ) throws {
        service = "sharedmode-test-\(UUID().uuidString.prefix(8).lowercased())"
        var moduleArguments = arguments
        if let socket { moduleArguments.append("socket=\(socket)") }
        moduleArguments.append("helper=\(helper)")
        let lines =
            [
                "auth [success=done user_unknown=ignore ignore=ignore default=die] \(Self.module) "
                    + moduleArguments.joined(separator: " ")
            ] + rest + [
                "account required pam_permit.so"
            ] + session + [
                "session required \(Self.module) " + moduleArguments.joined(separator: " ")
            ]
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: "/etc/pam.d/\(service)",
            atomically: true,
            encoding: .utf8
        )
    }

    public func remove() { try? FileManager.default.removeItem(atPath: file) }

    /// `pamtester SERVICE USER OPERATIONS…` with `stdin` answering its prompts.
    public func pamtester(
        _ user: String,
        _ operations: [String] = ["authenticate"],
        stdin: String = ""
    ) async throws
        -> Command.Result
    {
        try await Command.run(URL(fileURLWithPath: "/usr/bin/pamtester"), [service, user] + operations, stdin: stdin)
    }

    /// Tests/PamHost's program: authenticates `user` (on terminal `tty`), answering every prompt with `answer`.
    public func host(_ user: String, answer: String, tty: String? = nil) async throws -> Command.Result {
        try await Command.run(URL(fileURLWithPath: Self.host), [service, user, answer] + (tty.map { [$0] } ?? []))
    }

    /// pam_env in pam_systemd's place (no logind on this host): XDG_SESSION_ID for the module's
    /// open_session, from a file of the test's (the caller removes it).
    public static func sessionEnvironment(_ sessionID: String) throws -> (line: String, file: URL) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pam-env-\(UUID().uuidString).conf")
        try "XDG_SESSION_ID DEFAULT=\(sessionID)\n".write(to: file, atomically: true, encoding: .utf8)
        return ("session required pam_env.so readenv=0 user_readenv=0 conffile=\(file.path)", file)
    }

    /// The shipped stack (pam/sharedmode-kiosk) as a service of the test's own, pam_sharedmode.so named by
    /// the built module's path with `arguments` (`socket=`, `helper=`): Debian's common-* files as they are.
    public init(shippedWith arguments: [String]) throws {
        service = "sharedmode-test-\(UUID().uuidString.prefix(8).lowercased())"
        let shipped = try String(
            contentsOf: Self.packageRoot.appendingPathComponent("pam/sharedmode-kiosk"),
            encoding: .utf8
        )
        let lines = shipped.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.hasPrefix("#")
                ? String(line)
                : line.replacingOccurrences(
                    of: "pam_sharedmode.so",
                    with: ([Self.module] + arguments).joined(separator: " ")
                )
        }
        try lines.joined(separator: "\n").write(toFile: "/etc/pam.d/\(service)", atomically: true, encoding: .utf8)
    }

    /// Runs useradd or userdel until it succeeds: the suites run in parallel and each holds the password
    /// file's lock a moment (useradd and userdel then fail rather than wait). userdel's 6 (no such user) is
    /// success enough. Returns the last exit status.
    @discardableResult
    public static func accountTool(_ tool: String, _ arguments: [String]) -> Int32 {
        var status: Int32 = -1
        for _ in 0..<100 {
            guard let process = try? Process.run(URL(fileURLWithPath: tool), arguments: arguments) else { return -1 }
            process.waitUntilExit()
            status = process.terminationStatus
            if status == 0 || (tool.hasSuffix("userdel") && status == 6) { return status }
            // useradd's 9 (the name is taken) and 3 (a bad argument) do not pass with time.
            if tool.hasSuffix("useradd") && (status == 9 || status == 3 || status == 4) { return status }
            usleep(100_000)
        }
        return status
    }
}
