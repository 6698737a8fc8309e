import Foundation
import SharedDevice
import Synchronization

/// The shift's login session as the broker recorded it at OpenLoginSession: the logind session, its user,
/// the worker, when and where it opened, and what a sign-out does to it. Never a secret.
struct ShiftSessionRecord: Codable, Equatable, Sendable {
    /// logind's session id.
    var sessionId: String
    /// The local account the session runs as, and its uid.
    var user: String
    var uid: UInt32
    /// The worker whose shift it is.
    var account: DeviceAccount
    /// The correlation id of the worker's sign-in.
    var correlationID: String
    var openedAt: Date
    var place: LoginScreenPlace
    var onSignOut: DevicePolicy.SessionEndAction
    /// Seconds between TerminateSession and KillSession with SIGKILL.
    var terminateGraceSeconds: Int
    /// The audit sequence of the `session.opened` event: only sign-outs after it end this session.
    var openedSequence: Int64
}

/// The shift's login session the broker keeps: the recorded one (also in `ShiftSessionFile`) and the
/// workers signed in at the login screen whose session has not opened yet, each until its grace ends.
final class ShiftSessions: Sendable {
    /// A worker signed in at the login screen, waiting for OpenLoginSession.
    struct Expected: Codable, Sendable {
        var account: DeviceAccount
        var deadline: Date
    }

    private struct State {
        var record: ShiftSessionRecord?
        var expected: [String: Expected] = [:]
        var graces: [String: Task<Void, Never>] = [:]
    }

    private let state: Mutex<State>
    private let file: StateFile<ShiftSessionRecord>?
    private let pendingFile: StateFile<[String: Expected]>?

    /// The recorded session kept in `file`, the expected ones in `pendingFile` (nil: in memory only), so
    /// that a restart of the daemon neither forgets the shift's session nor a worker's grace.
    init(file: StateFile<ShiftSessionRecord>?, pendingFile: StateFile<[String: Expected]>?) {
        self.file = file
        self.pendingFile = pendingFile
        state = Mutex(State(record: file?.load(), expected: pendingFile?.load() ?? [:]))
    }

    /// The workers expected to open their session, by the correlation id of their sign-in (those kept
    /// from before a restart included).
    var allExpected: [String: Expected] { state.withLock { $0.expected } }

    /// The recorded session.
    var record: ShiftSessionRecord? { state.withLock { $0.record } }

    /// Records `record` as the shift's session (the worker's expectation ends).
    func open(_ record: ShiftSessionRecord) {
        state.withLock { state in
            state.record = record
            if state.expected.removeValue(forKey: record.correlationID) != nil { keep(state.expected) }
            file?.save(record)
        }
    }

    /// Clears the record and returns it when `matches` holds for it; nil otherwise (nothing changes).
    func take(where matches: (ShiftSessionRecord) -> Bool) -> ShiftSessionRecord? {
        state.withLock { state in
            guard let record = state.record, matches(record) else { return nil }
            state.record = nil
            file?.save(nil)
            return record
        }
    }

    /// The worker signed in with `correlationID` is to open their session by `deadline`.
    func expect(_ correlationID: String, account: DeviceAccount, deadline: Date) {
        state.withLock { state in
            state.expected[correlationID] = Expected(account: account, deadline: deadline)
            keep(state.expected)
        }
    }

    /// The task that ends the grace of `correlationID` (replacing any earlier one of it).
    func keepGrace(_ correlationID: String, _ task: Task<Void, Never>) {
        state.withLock { $0.graces[correlationID] = task }
    }

    /// The grace of `correlationID` has been acted on: its task is forgotten.
    func graceEnded(_ correlationID: String) {
        _ = state.withLock { $0.graces.removeValue(forKey: correlationID) }
    }

    /// Cancels every grace task kept so far (the expectations stay): what the daemon's end does to them.
    func cancelGraces() {
        let tasks = state.withLock { state in
            defer { state.graces = [:] }
            return Array(state.graces.values)
        }
        for task in tasks { task.cancel() }
    }

    /// Waits for every grace task kept so far to return (their clock moved past them, or cancelled).
    func settleGraces() async {
        let tasks = state.withLock { state in
            defer { state.graces = [:] }
            return Array(state.graces.values)
        }
        for task in tasks { await task.value }
    }

    /// The expectation of `correlationID`, if it is still open.
    func expected(_ correlationID: String) -> Expected? {
        state.withLock { $0.expected[correlationID] }
    }

    /// Ends the expectation of `correlationID` and returns it, if it was still open.
    func takeExpected(_ correlationID: String) -> Expected? {
        state.withLock { state in
            let expected = state.expected.removeValue(forKey: correlationID)
            if expected != nil { keep(state.expected) }
            return expected
        }
    }

    /// Writes the expected workers to their file (removed once there are none).
    private func keep(_ expected: [String: Expected]) {
        pendingFile?.save(expected.isEmpty ? nil : expected)
    }
}
