import Foundation
import Logging
import LoginSessions
import Testing

/// `Logind` against what this machine has: no system bus here (PID 1 is not systemd), the real logind in
/// a booted systemd (tools/systemtest's container runs the product against it). Serialized: the first
/// test points the process's DBUS_SYSTEM_BUS_ADDRESS elsewhere while it runs.
@Suite(.serialized)
struct LogindTests {
    @Test func withoutASystemBusTheInitFailsSayingSo() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("no-bus-\(UUID().uuidString)")
        let saved = ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"]
        setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=\(directory.path)/system_bus_socket", 1)
        defer {
            if let saved { setenv("DBUS_SYSTEM_BUS_ADDRESS", saved, 1) } else { unsetenv("DBUS_SYSTEM_BUS_ADDRESS") }
        }
        let error = #expect(throws: LoginSessionError.self) {
            _ = try Logind(logger: Logger(label: "test"))
        }
        #expect(error?.message.contains("cannot connect to the system bus") == true)
        #expect(error?.message.contains("systemctl status dbus") == true)
        #expect(error?.dbusError == nil)
    }

    /// Only in a booted systemd (sd_booted's test: /run/systemd/system), where logind runs: a session it
    /// does not have is gone, never an error.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/run/systemd/system")))
    func aSessionLogindDoesNotHaveIsGoneNotAnError() async throws {
        let logind = try Logind(logger: Logger(label: "test"))
        #expect(try await logind.sessionExists("sharedmode-no-such-session") == false)
        #expect(try await logind.sessionUser("sharedmode-no-such-session") == nil)
        try await logind.terminateSession("sharedmode-no-such-session")
        try await logind.killSession("sharedmode-no-such-session", signal: SIGKILL)
        try await logind.lockSession("sharedmode-no-such-session")
    }

    /// Against a session made for the test in a booted systemd (for instance `systemd-run -p PAMName=login
    /// -p User=kiosk sleep infinity` in tools/systemtest's container), named in SHAREDMODE_LOGIND_TEST_SESSION:
    /// logind knows it and its user; terminating it ends it, and the stream hears logind remove it.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["SHAREDMODE_LOGIND_TEST_SESSION"] != nil))
    func aSessionIsKnownThenTerminatedAndHeardRemoved() async throws {
        let id = try #require(ProcessInfo.processInfo.environment["SHAREDMODE_LOGIND_TEST_SESSION"])
        let logind = try Logind(logger: Logger(label: "test"))
        #expect(try await logind.sessionExists(id))
        #expect(try await logind.sessionUser(id) != nil)
        let removed = logind.removedSessions()
        try await logind.lockSession(id)
        try await logind.terminateSession(id)
        try await logind.killSession(id, signal: SIGKILL)
        var heard: String?
        for await removedID in removed where removedID == id {
            heard = removedID
            break
        }
        #expect(heard == id)
        #expect(try await logind.sessionExists(id) == false)
    }
}
