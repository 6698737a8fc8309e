import CSystemd
public import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// logind (`org.freedesktop.login1` on the system bus) through sd-bus: what deviced asks of the login
/// manager to end a worker's shift where it runs.
///
/// Every call runs on one thread of its own (sd-bus is not thread-safe), never on Swift's cooperative
/// pool, and fails after 5 s. A session logind does not have (`NoSuchSession`, or an object already
/// gone) is "gone", never an error. logind allows terminating, killing or locking another user's
/// session to a caller with `CAP_KILL` (or a uid logind trusts) or polkit's `org.freedesktop.login1.manage`;
/// its refusal is a `LoginSessionError` carrying the D-Bus error's name.
public final class Logind: LoginSessionControl {
    private let thread: SystemBusThread
    private let listeners: RemovedSessionListeners
    private let logger: Logger

    /// Connects to the system bus. The thread that serves the calls starts with the first one.
    /// - Throws: `LoginSessionError` saying so when there is no system bus to connect to.
    public init(logger: Logger) throws(LoginSessionError) {
        let listeners = RemovedSessionListeners()
        self.listeners = listeners
        self.logger = logger
        thread = try SystemBusThread(logger: logger) { id in
            logger.debug("logind removed a session", metadata: ["session": "\(id)"])
            listeners.yield(id)
        }
    }

    deinit {
        thread.stop()
        listeners.finish()
    }

    public func sessionExists(_ id: String) async throws(LoginSessionError) -> Bool {
        try await run { bus throws(LoginSessionError) in
            // A closing session (TerminateSession sent SIGTERM) whose processes have not all exited is still
            // there: the broker's SIGKILL after the grace is for exactly those.
            guard let path = try Self.sessionPath(bus, id) else { return false }
            return try Self.stringProperty(bus, path, "State") != nil
        }
    }

    public func sessionUser(_ id: String) async throws(LoginSessionError) -> UInt32? {
        try await run { bus throws(LoginSessionError) in
            guard let path = try Self.sessionPath(bus, id) else { return nil }
            return try Self.userProperty(bus, path)
        }
    }

    public func terminateSession(_ id: String) async throws(LoginSessionError) {
        try await managerCall("TerminateSession", id)
        logger.info("logind terminates the session", metadata: ["session": "\(id)"])
    }

    public func killSession(_ id: String, signal: Int32) async throws(LoginSessionError) {
        try await managerCall("KillSession", id, who: "all", signal: signal)
        logger.info(
            "logind signals every process of the session",
            metadata: ["session": "\(id)", "signal": "\(signal)"]
        )
    }

    public func lockSession(_ id: String) async throws(LoginSessionError) {
        try await managerCall("LockSession", id)
        logger.info("logind locks the session", metadata: ["session": "\(id)"])
    }

    public func removedSessions() -> AsyncStream<String> {
        let stream = listeners.makeStream()
        thread.listenForRemovedSessions()
        return stream
    }

    // MARK: - On the bus thread

    /// Runs `body` on the bus thread and waits for it without holding a cooperative thread.
    private func run<Value: Sendable>(
        _ body: @escaping @Sendable (OpaquePointer) throws(LoginSessionError) -> Value
    ) async throws(LoginSessionError) -> Value {
        let outcome: Result<Value, LoginSessionError> = await withCheckedContinuation { continuation in
            thread.enqueue { bus, failure in
                guard let bus else {
                    continuation.resume(
                        returning: .failure(failure ?? LoginSessionError("the system bus is not connected"))
                    )
                    return
                }
                do throws(LoginSessionError) {
                    continuation.resume(returning: .success(try body(bus)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try outcome.get()
    }

    /// A Manager method taking the session id (and, for `KillSession`, whom and which signal); a session
    /// logind does not have is no error.
    private func managerCall(
        _ method: String,
        _ id: String,
        who: String? = nil,
        signal: Int32? = nil
    ) async throws(LoginSessionError) {
        try await run { bus throws(LoginSessionError) in
            let message = try Self.newManagerCall(bus, method)
            defer { sd_bus_message_unref(message) }
            var result = id.withCString { sd_bus_message_append_basic(message, Self.type("s"), $0) }
            if result >= 0, let who {
                result = who.withCString { sd_bus_message_append_basic(message, Self.type("s"), $0) }
            }
            if result >= 0, var signal { result = sd_bus_message_append_basic(message, Self.type("i"), &signal) }
            guard result >= 0 else {
                throw LoginSessionError("cannot build logind's \(method) call: \(SystemBusThread.text(result))")
            }
            guard let reply = try Self.call(bus, message, method, session: id) else { return }
            sd_bus_message_unref(reply)
        }
    }

    /// The session's object path, nil when logind has no such session.
    private static func sessionPath(_ bus: OpaquePointer, _ id: String) throws(LoginSessionError) -> String? {
        let message = try newManagerCall(bus, "GetSession")
        defer { sd_bus_message_unref(message) }
        let result = id.withCString { sd_bus_message_append_basic(message, type("s"), $0) }
        guard result >= 0 else {
            throw LoginSessionError("cannot build logind's GetSession call: \(SystemBusThread.text(result))")
        }
        guard let reply = try call(bus, message, "GetSession", session: id) else { return nil }
        defer { sd_bus_message_unref(reply) }
        var path: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(reply, type("o"), &path) > 0, let path else {
            throw LoginSessionError("logind's GetSession replied without an object path")
        }
        return String(cString: path)
    }

    /// A string property of the session object; nil when the object is gone.
    private static func stringProperty(
        _ bus: OpaquePointer,
        _ path: String,
        _ name: String
    ) throws(LoginSessionError) -> String? {
        guard let reply = try property(bus, path, name, "s") else { return nil }
        defer { sd_bus_message_unref(reply) }
        var value: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(reply, type("s"), &value) > 0, let value else {
            throw LoginSessionError("logind's session property \(name) is not a string")
        }
        return String(cString: value)
    }

    /// The session's `User` property, `(uo)`: its uid; nil when the object is gone.
    private static func userProperty(_ bus: OpaquePointer, _ path: String) throws(LoginSessionError) -> UInt32? {
        guard let reply = try property(bus, path, "User", "(uo)") else { return nil }
        defer { sd_bus_message_unref(reply) }
        var uid: UInt32 = 0
        guard sd_bus_message_enter_container(reply, type("r"), "uo") > 0,
            sd_bus_message_read_basic(reply, type("u"), &uid) > 0
        else {
            throw LoginSessionError("logind's session property User is not (uo)")
        }
        return uid
    }

    /// `org.freedesktop.DBus.Properties.Get` on the session object, the reply inside its variant; nil when
    /// the object is gone (the session ended between the two calls).
    private static func property(
        _ bus: OpaquePointer,
        _ path: String,
        _ name: String,
        _ signature: String
    ) throws(LoginSessionError) -> OpaquePointer? {
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let result = sd_bus_get_property(
            bus,
            "org.freedesktop.login1",
            path,
            "org.freedesktop.login1.Session",
            name,
            &error,
            &reply,
            signature
        )
        if result >= 0, let reply { return reply }
        if let reply { sd_bus_message_unref(reply) }
        if isGone(error) { return nil }
        throw failure("reading the session's \(name)", result, error)
    }

    private static func newManagerCall(
        _ bus: OpaquePointer,
        _ method: String
    ) throws(LoginSessionError) -> OpaquePointer {
        var message: OpaquePointer?
        let result = sd_bus_message_new_method_call(
            bus,
            &message,
            "org.freedesktop.login1",
            "/org/freedesktop/login1",
            "org.freedesktop.login1.Manager",
            method
        )
        guard result >= 0, let message else {
            throw LoginSessionError("cannot build logind's \(method) call: \(SystemBusThread.text(result))")
        }
        return message
    }

    /// Calls (5 s at most); the reply is the caller's to release; nil when logind has no such session.
    private static func call(
        _ bus: OpaquePointer,
        _ message: OpaquePointer,
        _ method: String,
        session: String
    ) throws(LoginSessionError) -> OpaquePointer? {
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let result = sd_bus_call(bus, message, 0, &error, &reply)
        if result >= 0, let reply { return reply }
        if let reply { sd_bus_message_unref(reply) }
        if isGone(error) { return nil }
        throw failure("\(method) for session \(session)", result, error)
    }

    /// logind has no such session, or its object went away.
    private static func isGone(_ error: sd_bus_error) -> Bool {
        guard let name = error.name.map({ String(cString: $0) }) else { return false }
        return [
            "org.freedesktop.login1.NoSuchSession",
            "org.freedesktop.DBus.Error.UnknownObject",
            "org.freedesktop.DBus.Error.UnknownInterface",
        ].contains(name)
    }

    private static func failure(_ what: String, _ result: Int32, _ error: sd_bus_error) -> LoginSessionError {
        let name = error.name.map { String(cString: $0) }
        let detail = error.message.map { String(cString: $0) } ?? SystemBusThread.text(result)
        switch name {
        case "org.freedesktop.DBus.Error.AccessDenied", "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired":
            return LoginSessionError(
                """
                logind refused \(what): \(detail); the caller needs CAP_KILL (deviced.service grants it) or \
                polkit's org.freedesktop.login1.manage
                """,
                dbusError: name
            )
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            return LoginSessionError(
                "logind is not running (\(detail)); \(what) needs systemd-logind (systemctl status systemd-logind)",
                dbusError: name
            )
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout":
            return LoginSessionError("logind did not answer \(what) within 5 s: \(detail)", dbusError: name)
        default:
            if result == -ETIMEDOUT {
                return LoginSessionError("logind did not answer \(what) within 5 s", dbusError: name)
            }
            return LoginSessionError("logind failed \(what): \(detail)", dbusError: name)
        }
    }

    private static func type(_ code: Unicode.Scalar) -> CChar { CChar(UInt8(ascii: code)) }
}

/// The streams of `removedSessions()`: each hears every id from its making until its consumer stops.
final class RemovedSessionListeners: Sendable {
    private let continuations = Mutex<(next: Int, all: [Int: AsyncStream<String>.Continuation])>((0, [:]))

    func makeStream() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let key = continuations.withLock { state in
            defer { state.next += 1 }
            state.all[state.next] = continuation
            return state.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.all.removeValue(forKey: key) }
        }
        return stream
    }

    func yield(_ id: String) {
        for continuation in continuations.withLock({ Array($0.all.values) }) { continuation.yield(id) }
    }

    func finish() {
        for continuation in continuations.withLock({ state in
            defer { state.all.removeAll() }
            return Array(state.all.values)
        }) { continuation.finish() }
    }
}
