import CSystemd
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The one thread that owns deviced's system-bus connection (sd-bus is not thread-safe): it runs the
/// queued calls, hears logind's `SessionRemoved` and hands each id to `onSessionRemoved`.
///
/// Started lazily by the first call or stream; it polls the bus and a wake pipe with a 1 s bound, so
/// `stop()` ends it at once and a lost bus is noticed. A bus that closes (dbus restarted) is opened again
/// on the next call; the signal match is installed again with it.
final class SystemBusThread: @unchecked Sendable {
    /// How long one call may take before it fails (sd-bus's method-call timeout).
    static let callTimeoutMicroseconds: UInt64 = 5_000_000

    /// Work for the thread: given the open bus, or nil when there is none (the thread stopped, the bus
    /// could not be opened: `failure` says why).
    typealias Work = @Sendable (_ bus: OpaquePointer?, _ failure: LoginSessionError?) -> Void

    private struct Shared {
        var queue: [Work] = []
        var started = false
        var stopping = false
        var wantsSignal = false
    }

    private let shared = Mutex(Shared())
    private let wakeReader: Int32
    private let wakeWriter: Int32
    private let logger: Logger
    private let onSessionRemoved: @Sendable (String) -> Void

    // Touched only on the thread (and in `init`, before it starts).
    private var bus: OpaquePointer?
    private var matchSlot: OpaquePointer?

    /// Opens the system bus (so that a missing one fails here, clearly) without starting the thread.
    init(logger: Logger, onSessionRemoved: @escaping @Sendable (String) -> Void) throws(LoginSessionError) {
        self.logger = logger
        self.onSessionRemoved = onSessionRemoved
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            throw LoginSessionError("cannot make a pipe for the system bus thread: \(String(cString: strerror(errno)))")
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        (wakeReader, wakeWriter) = (fds[0], fds[1])
        do {
            bus = try Self.openBus()
        } catch {
            close(wakeReader)
            close(wakeWriter)
            throw error
        }
    }

    deinit {
        if let matchSlot { sd_bus_slot_unref(matchSlot) }
        if let bus { sd_bus_flush_close_unref(bus) }
        close(wakeReader)
        close(wakeWriter)
    }

    /// Runs `work` on the thread (starting it if need be).
    func enqueue(_ work: @escaping Work) {
        let run = shared.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.queue.append(work)
            return true
        }
        guard run else {
            work(nil, LoginSessionError("the logind client has stopped"))
            return
        }
        startIfNeeded()
        wake()
    }

    /// Listens for `SessionRemoved` from now on (starting the thread if need be).
    func listenForRemovedSessions() {
        let start = shared.withLock { state -> Bool in
            guard !state.stopping, !state.wantsSignal else { return false }
            state.wantsSignal = true
            return true
        }
        guard start else { return }
        startIfNeeded()
        wake()
    }

    /// Ends the thread (after the call in progress, at most one call timeout); queued work fails.
    func stop() {
        shared.withLock { $0.stopping = true }
        wake()
    }

    // MARK: - The thread

    private func startIfNeeded() {
        let start = shared.withLock { state -> Bool in
            guard !state.started else { return false }
            state.started = true
            return true
        }
        guard start else { return }
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread,
            nil,
            { context in
                let owner = Unmanaged<SystemBusThread>.fromOpaque(context!).takeRetainedValue()
                owner.run()
                return nil
            },
            context
        )
        if result == 0 {
            pthread_detach(thread)
        } else {
            Unmanaged<SystemBusThread>.fromOpaque(context).release()
            logger.error("cannot start the system bus thread: \(String(cString: strerror(result)))")
            shared.withLock { $0.started = false }
            failQueued(LoginSessionError("cannot start the system bus thread: \(String(cString: strerror(result)))"))
        }
    }

    private func run() {
        var signalInstalled = false
        while true {
            let (work, stopping, wantsSignal) = shared.withLock { state in
                defer { state.queue.removeAll() }
                return (state.queue, state.stopping, state.wantsSignal)
            }
            if stopping {
                for item in work { item(nil, LoginSessionError("the logind client has stopped")) }
                failQueued(LoginSessionError("the logind client has stopped"))
                return
            }
            var failure: LoginSessionError?
            if bus == nil {
                do {
                    bus = try Self.openBus()
                    logger.notice("the system bus is back; logind is reachable again")
                    signalInstalled = false
                } catch {
                    failure = error
                }
            }
            if wantsSignal, !signalInstalled, let bus {
                signalInstalled = installMatch(on: bus)
            }
            for item in work { item(bus, bus == nil ? failure : nil) }
            guard let bus else {
                // No bus: wait for the next call (or a second, should a stream be waiting for signals).
                waitForWake(milliseconds: wantsSignal ? 1000 : -1)
                continue
            }
            var result: Int32
            repeat { result = sd_bus_process(bus, nil) } while result > 0
            if result < 0 {
                logger.notice(
                    "the system bus connection closed; deviced opens it again at the next logind call",
                    metadata: ["error": "\(Self.text(result))"]
                )
                if let matchSlot { sd_bus_slot_unref(matchSlot) }
                matchSlot = nil
                sd_bus_flush_close_unref(bus)
                self.bus = nil
                signalInstalled = false
                continue
            }
            var timeout: UInt64 = 0
            _ = sd_bus_get_timeout(bus, &timeout)
            var fds = [
                pollfd(fd: sd_bus_get_fd(bus), events: Int16(truncatingIfNeeded: sd_bus_get_events(bus)), revents: 0),
                pollfd(fd: wakeReader, events: Int16(POLLIN), revents: 0),
            ]
            _ = poll(&fds, 2, min(Self.milliseconds(until: timeout), 1000).clampedToNonNegative(or: 1000))
            if fds[1].revents != 0 { drainWake() }
        }
    }

    private func installMatch(on bus: OpaquePointer) -> Bool {
        let callback: sd_bus_message_handler_t = { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            let owner = Unmanaged<SystemBusThread>.fromOpaque(userdata).takeUnretainedValue()
            var id: UnsafePointer<CChar>?
            guard sd_bus_message_read_basic(message, CChar(UInt8(ascii: "s")), &id) > 0, let id else { return 0 }
            owner.onSessionRemoved(String(cString: id))
            return 0
        }
        var slot: OpaquePointer?
        let result = sd_bus_match_signal_async(
            bus,
            &slot,
            "org.freedesktop.login1",
            "/org/freedesktop/login1",
            "org.freedesktop.login1.Manager",
            "SessionRemoved",
            callback,
            nil,
            Unmanaged.passUnretained(self).toOpaque()
        )
        guard result >= 0 else {
            logger.warning("cannot listen for logind's SessionRemoved: \(Self.text(result))")
            return false
        }
        matchSlot = slot
        return true
    }

    private func failQueued(_ error: LoginSessionError) {
        let work = shared.withLock { state in
            defer { state.queue.removeAll() }
            return state.queue
        }
        for item in work { item(nil, error) }
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWriter, &byte, 1)
    }

    private func waitForWake(milliseconds: Int32) {
        var fds = [pollfd(fd: wakeReader, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, 1, milliseconds)
        if fds[0].revents != 0 { drainWake() }
    }

    private func drainWake() {
        var drain = [UInt8](repeating: 0, count: 256)
        while read(wakeReader, &drain, drain.count) > 0 {}
    }

    // MARK: - Helpers

    private static func openBus() throws(LoginSessionError) -> OpaquePointer {
        var opened: OpaquePointer?
        let result = sd_bus_open_system(&opened)
        guard result >= 0, let opened else {
            throw LoginSessionError(
                """
                cannot connect to the system bus (\(text(result))): logind is reached through it; \
                is dbus running (systemctl status dbus), and may this process reach /run/dbus/system_bus_socket?
                """
            )
        }
        _ = sd_bus_set_method_call_timeout(opened, callTimeoutMicroseconds)
        return opened
    }

    static func text(_ result: Int32) -> String { String(cString: strerror(-result)) }

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

extension Int32 {
    /// The value, or `fallback` when it is negative (poll's "no timeout").
    fileprivate func clampedToNonNegative(or fallback: Int32) -> Int32 { self < 0 ? fallback : self }
}
