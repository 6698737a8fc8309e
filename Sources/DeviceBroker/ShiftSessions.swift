import Foundation
import SharedDevice
import Synchronization

/// The shift's login session the broker keeps: the recorded one (also in `ShiftSessionFile`) and the
/// workers signed in at the login screen whose session has not opened yet, each until its grace ends.
final class ShiftSessions: Sendable {
    /// A worker signed in at the login screen, waiting for OpenLoginSession.
    struct Expected: Sendable {
        var account: DeviceAccount
        var deadline: Date
    }

    private struct State {
        var record: ShiftSessionRecord?
        var expected: [String: Expected] = [:]
        var graces: [String: Task<Void, Never>] = [:]
    }

    private let state: Mutex<State>
    private let file: ShiftSessionFile?

    /// The sessions kept in `file` (nil: in memory only).
    init(file: ShiftSessionFile?) {
        self.file = file
        state = Mutex(State(record: file?.load()))
    }

    /// The recorded session.
    var record: ShiftSessionRecord? { state.withLock { $0.record } }

    /// Records `record` as the shift's session (the worker's expectation ends).
    func open(_ record: ShiftSessionRecord) {
        state.withLock { state in
            state.record = record
            state.expected[record.correlationID] = nil
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
        state.withLock { $0.expected[correlationID] = Expected(account: account, deadline: deadline) }
    }

    /// The task that ends the grace of `correlationID` (replacing any earlier one of it).
    func keepGrace(_ correlationID: String, _ task: Task<Void, Never>) {
        state.withLock { $0.graces[correlationID] = task }
    }

    /// The grace of `correlationID` has been acted on: its task is forgotten.
    func graceEnded(_ correlationID: String) {
        _ = state.withLock { $0.graces.removeValue(forKey: correlationID) }
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
        state.withLock { $0.expected.removeValue(forKey: correlationID) }
    }
}
