import CProcessControl
import CSystemd
public import Logging
public import ProcessSandbox
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A D-Bus failure of the session bus (opening it, owning the name, a call of the bridge's own).
public struct SessionBusError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// A method call of the served interface with the broker protocol's three strings.
public struct BusMethodCall: Sendable {
    /// The method's name (`acquireTokenSilently`, …).
    public var member: String
    /// The protocol version the client speaks (`0.0`).
    public var protocolVersion: String
    /// MSALRuntime's correlation id of the call.
    public var correlationID: String
    /// The JSON request.
    public var request: String
    /// The sandbox of the calling process (`SessionBus.callerSandbox`): the bridge speaks to deviced as its
    /// own user, so a caller in a sandbox must not be served as that user's host app.
    public var callerSandbox: PeerSandbox = .host
    /// A pidfd of the calling process, taken when the call came and kept open while the call is answered
    /// (closed when the last copy of the call goes): what the bridge hands deviced for a sandboxed caller
    /// (`ActForCaller`); nil when the caller could not be pinned.
    public var callerProcess: ProcessHandle?
}

/// A service on the user's session bus through sd-bus: one object whose interface's methods all take
/// three strings and return one (Microsoft's broker protocol), answered asynchronously by a Swift
/// handler, plus the few calls of the bridge's own (the Secret Service, desktop notifications).
///
/// sd-bus is not thread-safe: every sd-bus call happens on the thread running `run()`. A handler's reply
/// and the bridge's own calls are queued for that thread, which a pipe wakes.
public final class SessionBus: @unchecked Sendable {
    /// The most calls answered at once; beyond it a call gets `busyReply` at once.
    public static let maximumCallsInProgress = 64

    // The loop thread's state: touched only on the thread running `run()` (and in `init` before it starts).
    private var bus: OpaquePointer?
    private var slot: OpaquePointer?
    private var pending: [UInt64: OpaquePointer] = [:]
    private var nextCallID: UInt64 = 0
    private var interface = ""
    private var busyReply = ""
    private var handler: (@Sendable (BusMethodCall) async -> String)?

    private let work = Mutex<[@Sendable () -> Void]>([])
    private let wakeReader: Int32, wakeWriter: Int32
    private let logger: Logger

    /// Connects to the user's session bus (`DBUS_SESSION_BUS_ADDRESS`).
    public init(logger: Logger) throws(SessionBusError) {
        self.logger = logger
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            throw SessionBusError(description: "cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        (wakeReader, wakeWriter) = (fds[0], fds[1])
        var opened: OpaquePointer?
        let result = sd_bus_open_user(&opened)
        guard result >= 0, let opened else {
            close(wakeReader)
            close(wakeWriter)
            throw SessionBusError(
                description:
                    "cannot connect to the session bus (is DBUS_SESSION_BUS_ADDRESS set?): \(Self.text(result))"
            )
        }
        bus = opened
    }

    deinit {
        if let slot { sd_bus_slot_unref(slot) }
        for message in pending.values { sd_bus_message_unref(message) }
        if let bus { sd_bus_flush_close_unref(bus) }
        close(wakeReader)
        close(wakeWriter)
    }

    /// Exports `path` with `interface` and then owns `name` (in that order, so no call finds the name
    /// without the object). Call before `run()`, on the thread that will run it.
    /// - Parameters:
    ///   - busyReply: the reply to a call beyond `maximumCallsInProgress`.
    ///   - handler: answers each call (on Swift's concurrency threads).
    /// - Throws: when the name is owned by another process, or the bus refuses.
    public func serve(
        name: String,
        path: String,
        interface: String,
        busyReply: String,
        handler: @escaping @Sendable (BusMethodCall) async -> String
    ) throws(SessionBusError) {
        self.interface = interface
        self.busyReply = busyReply
        self.handler = handler
        let callback: sd_bus_message_handler_t = { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            return Unmanaged<SessionBus>.fromOpaque(userdata).takeUnretainedValue().received(message)
        }
        var added: OpaquePointer?
        var result = sd_bus_add_object(bus, &added, path, callback, Unmanaged.passUnretained(self).toOpaque())
        guard result >= 0 else { throw SessionBusError(description: "cannot export \(path): \(Self.text(result))") }
        slot = added
        result = sd_bus_request_name(bus, name, 0)
        guard result >= 0 else {
            throw SessionBusError(
                description: result == -EEXIST
                    ? "\(name) is owned by another process on this session bus (another broker runs): stop it first"
                    : "cannot own \(name) on the session bus: \(Self.text(result))"
            )
        }
    }

    /// Serves until the session bus goes away (exit status 0) or fails (1).
    public func run() -> Int32 {
        while true {
            var result: Int32
            repeat { result = sd_bus_process(bus, nil) } while result > 0
            if result < 0 {
                if result == -ECONNRESET || result == -ENOTCONN {
                    logger.info("the session bus closed; the bridge exits")
                    return 0
                }
                logger.error("the session bus failed: \(Self.text(result))")
                return 1
            }
            for item in work.withLock({ queued in
                defer { queued.removeAll() }
                return queued
            }) { item() }
            var timeout: UInt64 = 0
            _ = sd_bus_get_timeout(bus, &timeout)
            var fds = [
                pollfd(fd: sd_bus_get_fd(bus), events: Int16(truncatingIfNeeded: sd_bus_get_events(bus)), revents: 0),
                pollfd(fd: wakeReader, events: Int16(POLLIN), revents: 0),
            ]
            _ = poll(&fds, 2, Self.milliseconds(until: timeout))
            if fds[1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 256)
                while read(wakeReader, &drain, drain.count) > 0 {}
            }
        }
    }

    /// Deletes the unlocked Secret Service items whose `xdg:schema` is `schema` (in the user's default
    /// keyring, through `org.freedesktop.secrets`); returns how many went.
    public func deleteSecretItems(schema: String) async throws(SessionBusError) -> Int {
        let outcome: Result<Int, SessionBusError> = await withCheckedContinuation { continuation in
            enqueue { continuation.resume(returning: self.deleteSecretItemsOnLoop(schema: schema)) }
        }
        return try outcome.get()
    }

    /// Shows a desktop notification (`org.freedesktop.Notifications`), if a notification service runs;
    /// nothing happens otherwise.
    public func notify(summary: String, body: String) {
        enqueue { self.notifyOnLoop(summary: summary, body: body) }
    }

    // MARK: - On the loop thread

    private func received(_ message: OpaquePointer) -> Int32 {
        guard let called = sd_bus_message_get_interface(message), String(cString: called) == interface,
            let member = sd_bus_message_get_member(message), sd_bus_message_has_signature(message, "sss") > 0,
            let handler
        else {
            return 0  // not ours: sd-bus answers Peer, Introspectable and unknown methods itself
        }
        var strings: [String] = []
        for _ in 0..<3 {
            var value: UnsafePointer<CChar>?
            guard sd_bus_message_read_basic(message, Self.type("s"), &value) > 0, let value else { return -EINVAL }
            strings.append(String(cString: value))
        }
        guard pending.count < Self.maximumCallsInProgress else {
            logger.warning(
                "too many broker calls in progress; one was answered busy",
                metadata: ["calls": "\(pending.count)"]
            )
            return reply(to: message, busyReply)
        }
        let id = nextCallID
        nextCallID += 1
        pending[id] = sd_bus_message_ref(message)
        let caller = callerProcess(message)
        let call = BusMethodCall(
            member: String(cString: member),
            protocolVersion: strings[0],
            correlationID: strings[1],
            request: strings[2],
            callerSandbox: caller.sandbox,
            callerProcess: caller.process
        )
        Task.detached {
            let answer = await handler(call)
            self.enqueue { self.replyPending(id, answer) }
        }
        return 1
    }

    /// The process that sent `message` and its sandbox: its pid from the bus (dbus 1.14 gives a
    /// `ProcessID` but no `ProcessFD`), a pidfd of it taken at once, the pid asked of the bus again (the
    /// connection still belongs to that process), then its root read as deviced reads a socket peer's. The
    /// pidfd is kept (for deviced, which identifies the process again from it). The race left: the pid
    /// reused by another process between the bus's first answer and `pidfd_open` whose connection then sent
    /// nothing; the second answer (the connection's pid unchanged) narrows it to a pid reused within that
    /// window by a process that the same connection now belongs to.
    private func callerProcess(_ message: OpaquePointer) -> (sandbox: PeerSandbox, process: ProcessHandle?) {
        guard let pid = senderPID(message) else {
            return (.unidentified(reason: "the bus gave no process id of the caller"), nil)
        }
        let pidfd = process_control_pidfd_open(pid)
        guard pidfd >= 0 else {
            return (errno == ENOSYS ? .unpinned : .unidentified(reason: "the caller's process is gone"), nil)
        }
        let process = ProcessHandle(adopting: pidfd)
        guard senderPID(message) == pid else {
            return (.unidentified(reason: "the caller's connection no longer belongs to its process"), nil)
        }
        let sandbox = SandboxReader.sandbox(ofProcess: pid, pidfd: pidfd)
        return (sandbox, process)
    }

    /// The pid of `message`'s sender as the bus says now (GetConnectionCredentials).
    private func senderPID(_ message: OpaquePointer) -> Int32? {
        var creds: OpaquePointer?
        guard sd_bus_query_sender_creds(message, UInt64(SD_BUS_CREDS_PID), &creds) >= 0, let creds else {
            return nil
        }
        defer { sd_bus_creds_unref(creds) }
        var pid: pid_t = 0
        guard sd_bus_creds_get_pid(creds, &pid) >= 0, pid > 0 else { return nil }
        return pid
    }

    private func replyPending(_ id: UInt64, _ answer: String) {
        guard let message = pending.removeValue(forKey: id) else { return }
        _ = reply(to: message, answer)
        sd_bus_message_unref(message)
    }

    private func reply(to message: OpaquePointer, _ answer: String) -> Int32 {
        var reply: OpaquePointer?
        var result = sd_bus_message_new_method_return(message, &reply)
        guard result >= 0, let reply else { return result }
        defer { sd_bus_message_unref(reply) }
        result = answer.withCString { sd_bus_message_append_basic(reply, Self.type("s"), $0) }
        if result >= 0 { result = sd_bus_send(bus, reply, nil) }
        if result < 0 { logger.debug("a reply could not be sent (the caller may have left): \(Self.text(result))") }
        return result < 0 ? result : 1
    }

    private func deleteSecretItemsOnLoop(schema: String) -> Result<Int, SessionBusError> {
        var search: OpaquePointer?
        var result = sd_bus_message_new_method_call(
            bus,
            &search,
            "org.freedesktop.secrets",
            "/org/freedesktop/secrets",
            "org.freedesktop.Secret.Service",
            "SearchItems"
        )
        guard result >= 0, let search else {
            return .failure(SessionBusError(description: "SearchItems: \(Self.text(result))"))
        }
        defer { sd_bus_message_unref(search) }
        result = sd_bus_message_open_container(search, Self.type("a"), "{ss}")
        if result >= 0 { result = sd_bus_message_open_container(search, Self.type("e"), "ss") }
        if result >= 0 { result = "xdg:schema".withCString { sd_bus_message_append_basic(search, Self.type("s"), $0) } }
        if result >= 0 { result = schema.withCString { sd_bus_message_append_basic(search, Self.type("s"), $0) } }
        if result >= 0 { result = sd_bus_message_close_container(search) }
        if result >= 0 { result = sd_bus_message_close_container(search) }
        guard result >= 0 else { return .failure(SessionBusError(description: "SearchItems: \(Self.text(result))")) }
        let found: OpaquePointer
        switch call(search, "SearchItems") {
        case .success(let reply): found = reply
        case .failure(let error): return .failure(error)
        }
        defer { sd_bus_message_unref(found) }
        var paths: [String] = []
        if sd_bus_message_enter_container(found, Self.type("a"), "o") > 0 {
            var path: UnsafePointer<CChar>?
            while sd_bus_message_read_basic(found, Self.type("o"), &path) > 0, let read = path {
                paths.append(String(cString: read))
            }
            _ = sd_bus_message_exit_container(found)
        }
        var deleted = 0
        for path in paths {
            var delete: OpaquePointer?
            guard
                sd_bus_message_new_method_call(
                    bus,
                    &delete,
                    "org.freedesktop.secrets",
                    path,
                    "org.freedesktop.Secret.Item",
                    "Delete"
                ) >= 0,
                let delete
            else { continue }
            defer { sd_bus_message_unref(delete) }
            if case .success(let reply) = call(delete, "Delete") {
                sd_bus_message_unref(reply)
                deleted += 1
            }
        }
        return .success(deleted)
    }

    private func notifyOnLoop(summary: String, body: String) {
        var message: OpaquePointer?
        guard
            sd_bus_message_new_method_call(
                bus,
                &message,
                "org.freedesktop.Notifications",
                "/org/freedesktop/Notifications",
                "org.freedesktop.Notifications",
                "Notify"
            ) >= 0, let message
        else { return }
        defer { sd_bus_message_unref(message) }
        var replaces: UInt32 = 0
        var expire: Int32 = -1
        var result = "Shared device sign-in".withCString { sd_bus_message_append_basic(message, Self.type("s"), $0) }
        if result >= 0 { result = sd_bus_message_append_basic(message, Self.type("u"), &replaces) }
        for text in ["dialog-password", summary, body] where result >= 0 {
            result = text.withCString { sd_bus_message_append_basic(message, Self.type("s"), $0) }
        }
        for contents in ["s", "{sv}"] where result >= 0 {
            result = sd_bus_message_open_container(message, Self.type("a"), contents)
            if result >= 0 { result = sd_bus_message_close_container(message) }
        }
        if result >= 0 { result = sd_bus_message_append_basic(message, Self.type("i"), &expire) }
        if result >= 0 { result = sd_bus_send(bus, message, nil) }
        if result < 0 { logger.debug("the desktop notification could not be sent: \(Self.text(result))") }
    }

    /// A blocking call of the bridge's own (5 s at most); the reply is the caller's to release.
    private func call(_ message: OpaquePointer, _ what: String) -> Result<OpaquePointer, SessionBusError> {
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let result = sd_bus_call(bus, message, 5_000_000, &error, &reply)
        guard result >= 0, let reply else {
            let detail = error.message.map { String(cString: $0) } ?? Self.text(result)
            return .failure(SessionBusError(description: "\(what): \(detail)"))
        }
        return .success(reply)
    }

    // MARK: - Helpers

    private func enqueue(_ item: @escaping @Sendable () -> Void) {
        work.withLock { $0.append(item) }
        var byte: UInt8 = 1
        _ = write(wakeWriter, &byte, 1)
    }

    private static func type(_ code: Unicode.Scalar) -> CChar { CChar(UInt8(ascii: code)) }

    private static func text(_ result: Int32) -> String { String(cString: strerror(-result)) }

    /// Milliseconds from now until the absolute CLOCK_MONOTONIC time `deadline` (µs); -1 for none.
    private static func milliseconds(until deadline: UInt64) -> Int32 {
        guard deadline != UInt64.max else { return -1 }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nowMicroseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        guard deadline > nowMicroseconds else { return 0 }
        return Int32(clamping: (deadline - nowMicroseconds + 999) / 1000)
    }
}
