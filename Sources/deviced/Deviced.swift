public import ArgumentParser
import BrokerServer
import DeviceBroker
import DeviceLocations
import Foundation
import KeychainStore
public import Logging
import NIOCore
import NIOPosix
import ProcessSandbox
import ServiceLifecycle
import SharedDevice
import UnixSignals
import Varlink
import VarlinkServer

/// `deviced`: the broker daemon. It alone opens the device's store; apps reach it over varlink on a Unix
/// socket, and the broker tells them apart by their uid (from the kernel).
@main
struct Deviced: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deviced",
        abstract: "The shared-device broker: serves apps over varlink (org.sharedmode.Broker1) on a Unix socket.",
        discussion: """
            Started by systemd (deviced.service, Type=notify; socket activation through deviced.socket works too) or by hand.
            The caller of every method is the policy's app with the caller's uid; see `devicectl provision`.

            The socket's directory must belong to the daemon's user and be writable by nobody else. Exit status: 0 after
            SIGTERM; 74 when the store or its lock file cannot be opened; 75 when another deviced serves the state directory
            or listens on the socket, or the socket's directory or path is unsafe (the message names the daemon or the path);
            78 when the key does not open the store or the state directory is unsafe (a directory on its path another user
            could swap: the message names it); 69 on any other failure.
            """,
        version: DeviceInformation.brokerVersion
    )

    @Option(
        help: ArgumentHelp(
            "State directory.",
            discussion: "Default: $DEVICECTL_STATE_DIR, else /var/lib/devicectl.",
            valueName: "dir"
        )
    )
    var stateDir: String?

    @Option(
        help: ArgumentHelp(
            "Socket to listen on (ignored when systemd passes one).",
            discussion: "Default: $DEVICECTL_SOCKET, else \(DeviceLocations.systemBrokerSocket).",
            valueName: "path"
        )
    )
    var socket: String?

    @Option(
        help: ArgumentHelp(
            "Log to standard error from this level up: trace, debug, info, notice, warning, error or critical.",
            discussion: "Default: $DEVICECTL_LOG_LEVEL, else info.",
            valueName: "level"
        )
    )
    var logLevel: Logger.Level?

    @Option(
        help: ArgumentHelp(
            "Most connections served at once.",
            discussion:
                "The policy's limits share them out: limits.administratorConnections of them (at most a quarter) are kept for administrators.",
            valueName: "count"
        )
    )
    var maxConnections: Int = 256

    @Option(
        help: ArgumentHelp(
            "Seconds after which a connection with no call in progress that sends nothing is closed.",
            valueName: "seconds"
        )
    )
    var idleTimeout: Int = 60

    @Option(
        help: ArgumentHelp(
            "Seconds within which a message must be complete once its first byte arrived.",
            valueName: "seconds"
        )
    )
    var messageTimeout: Int = 10

    @Option(
        help: ArgumentHelp(
            "Seconds a client may leave a reply unread before its connection is closed.",
            valueName: "seconds"
        )
    )
    var replyTimeout: Int = 30

    /// Runs the idle sign-out and the password back-off on the Unix time written in this file instead of the
    /// wall clock (time stands still until the file changes): for tests only.
    @Option(help: .hidden) var clockFile: String?

    /// Checks the disk reserve every this many seconds instead of every 2; 0: only after account changes (so a
    /// test can show what else does not make it). For tests only.
    @Option(help: .hidden) var diskReserveCheckSeconds: Int?

    /// Tells no sandboxed apps apart, as on a kernel before Linux 6.5 (no SO_PEERPIDFD): every caller is
    /// known by its uid only and the policy's Flatpak apps are refused. For the tests of that path only.
    @Flag(help: .hidden) var withoutPeerPidfd = false

    /// Runs without the allocator's wiping of freed memory (`MemoryHygiene`): for the benchmark of its cost only.
    @Flag(help: .hidden) var keepFreedMemory = false

    /// Runs each connection's calls on the socket thread instead of the store's threads: for the benchmark
    /// of the hop between them only (a store write would hold up every connection).
    @Flag(help: .hidden) var callsOnEventLoop = false

    /// Runs every call on the store's threads, none answered at once on the socket thread: for the benchmark of
    /// what answering at once saves only.
    @Flag(help: .hidden) var callsOnStoreThreads = false

    func validate() throws {
        guard (1...65_536).contains(maxConnections) else {
            throw ValidationError("--max-connections must be between 1 and 65536")
        }
        guard (1...86_400).contains(idleTimeout) else {
            throw ValidationError("--idle-timeout must be between 1 and 86400 seconds")
        }
        guard (1...3_600).contains(messageTimeout) else {
            throw ValidationError("--message-timeout must be between 1 and 3600 seconds")
        }
        guard (1...3_600).contains(replyTimeout) else {
            throw ValidationError("--reply-timeout must be between 1 and 3600 seconds")
        }
        guard (0...86_400).contains(diskReserveCheckSeconds ?? 2) else {
            throw ValidationError("--disk-reserve-check-seconds must be between 0 and 86400")
        }
    }

    /// The disk reserve for sign-outs on a full disk, made again on a timer once there is room (and by the
    /// broker after every account change); none with `--disk-reserve-check-seconds 0`.
    private func diskReserveKeeper(
        _ broker: Broker,
        executor: any TaskExecutor
    ) -> [ServiceGroupConfiguration.ServiceConfiguration] {
        let seconds = diskReserveCheckSeconds.map { Duration.seconds($0) } ?? Broker.diskReserveCheckInterval
        guard seconds > .zero else { return [] }
        return [
            .init(service: StoreThreadLoop(executor: executor) { await broker.runDiskReserveKeeper(every: seconds) })
        ]
    }

    func run() async throws {
        // First of all: the allocator wipes what is freed (a password's buffers), and no core file is written.
        let hygieneFailures = [
            keepFreedMemory ? nil : MemoryHygiene.restartWithTunablesIfNeeded(), MemoryHygiene.refuseCoreDumps(),
        ].compactMap { $0 }
        let level =
            logLevel ?? ProcessInfo.processInfo.environment["DEVICECTL_LOG_LEVEL"].flatMap {
                Logger.Level(rawValue: $0.lowercased())
            } ?? .info
        // Under systemd ($JOURNAL_STREAM), lines carry <N> priority prefixes so the journal keeps their levels.
        let journal = ProcessInfo.processInfo.environment["JOURNAL_STREAM"].map { !$0.isEmpty } ?? false
        LoggingSystem.bootstrap { label in
            if journal { return JournalLogHandler(label: label, level: level) }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "deviced")
        for failure in hygieneFailures { logger.warning("deviced: \(failure)") }
        let directory = DeviceLocations.stateDirectory(explicit: stateDir)
        let store: KeychainStore
        do {
            store = try KeychainStore(directory: directory, logger: logger)
        } catch {
            FileHandle.standardError.write(
                Data("deviced: error: cannot open the store in \(directory.path): \(error)\n".utf8)
            )
            throw ExitCode(
                error.code == .wrongKey || error.code == .insecureKeyFile || error.code == .insecureStateDirectory
                    ? 78 : 74
            )
        }
        // One daemon per state directory (each would run its own idle sign-out on the same store).
        let lock: StateDirectoryLock
        do {
            lock = try StateDirectoryLock(directory: directory)
        } catch {
            let message =
                error.holder.map {
                    """
                    another deviced or a key rotation (pid \($0)) holds the state directory \(directory.path); \
                    stop that deviced first (systemctl stop deviced), or give this one another --state-dir
                    """
                } ?? error.description
            FileHandle.standardError.write(Data("deviced: error: \(message)\n".utf8))
            throw ExitCode(error.held ? 75 : 74)
        }
        defer { withExtendedLifetime(lock) {} }
        // Space for sign-outs on a full disk (see KeychainStore.essentialWriteTransaction).
        do {
            try store.keepDiskReserve()
        } catch {
            logger.warning("deviced: no disk reserve for sign-outs on a full disk: \(error.message)")
        }
        let device = ManagedDevice(store: store, logger: logger)
        let clock: any IdleClock
        do {
            clock = try clockFile.map { path throws(FileClockError) in try FileClock(path: path) } ?? SystemIdleClock()
        } catch {
            FileHandle.standardError.write(Data("deviced: error: \(error)\n".utf8))
            throw ExitCode(64)
        }
        // Apps of one uid are told apart by their sandbox where the kernel pins a socket's peer (Linux 6.5).
        let identifiesSandboxes = PeerPIDFD.kernelSupports && !withoutPeerPidfd
        // logind, through which the broker ends (or locks) the shift's login session at a sign-out.
        let loginSessions = LoginManager.connect(logger: logger) ?? UnavailableLoginSessions()
        // The server's connection registry first, so that the broker is made knowing who is connected.
        let connections = VarlinkConnectionRegistry()
        let broker = Broker(
            device: device,
            idleClock: clock,
            passwordClock: { clock.now() },
            connections: BrokerServerConnections(connections),
            loginSessions: loginSessions,
            sessionClock: clock,
            identifiesSandboxes: identifiesSandboxes,
            logger: logger
        )
        // A store of 0.3.0 kept the token cache beside apps' items: move it into its namespace before serving.
        do {
            let moved = try broker.moveTokenCacheIntoNamespace()
            if moved > 0 { logger.notice("deviced: moved \(moved) token cache items into the token cache's namespace") }
        } catch {
            FileHandle.standardError.write(
                Data(
                    "deviced: error: cannot move the token cache into its namespace: \(error); nothing was changed\n"
                        .utf8
                )
            )
            throw ExitCode(74)
        }
        let listener: VarlinkServer.Listener
        if let inherited = SocketActivation.inheritedListener() {
            listener = .inherited(descriptor: inherited)
        } else {
            // The server creates the socket's directory (0755) if it is missing, once every directory above it is found safe.
            listener = .path(DeviceLocations.brokerSocket(explicit: socket))
        }
        var configuration = VarlinkServerConfiguration.broker(broker)
        configuration.maximumConnections = maxConnections
        configuration.idleTimeout = .seconds(Int64(idleTimeout))
        configuration.messageTimeout = .seconds(Int64(messageTimeout))
        configuration.replyTimeout = .seconds(Int64(replyTimeout))
        configuration.identifiesSandboxes = identifiesSandboxes
        configuration.runsCallsOnEventLoop = callsOnEventLoop
        configuration.answersCallsAtOnce = !callsOnStoreThreads
        // The store's blocking work (every call's, the admissions', the audit journal's, the idle sign-out's,
        // the refusal counts') runs on these few threads, never on Swift's cooperative pool, which the server's
        // connections keep (its threads end with the process).
        let storeThreads = VarlinkHandlerExecutor(threads: 4)
        let notifier = SystemdNotifier()
        // One thread for the sockets whatever the machine's core count (NIO's shared group has one per core):
        // the unit's TasksMax was measured with it, and the handler's work runs on the store's threads anyway.
        let socketThread = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = VarlinkServer(
            listener: listener,
            configuration: configuration,
            info: .broker,
            handler: BrokerMethodHandler(broker: broker),
            connections: connections,
            eventLoopGroup: socketThread,
            handlerExecutor: storeThreads,
            onServerRunning: {
                notifier.notify("READY=1\nSTATUS=serving")
                logger.info("deviced ready", metadata: ["deviced.listener": "\(listener)"])
            },
            logger: logger
        )
        let service = BrokerService(server: server, notifier: notifier, logger: logger)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [
                    .init(service: service, successTerminationBehavior: .gracefullyShutdownGroup),
                    .init(
                        service: AuditJournal(
                            device: device,
                            executor: storeThreads,
                            logger: logger,
                            stateDirectory: directory
                        )
                    ),
                    // The policy's idle sign-out (the monitor persists the worker's last activity when it stops).
                    .init(service: StoreThreadLoop(executor: storeThreads) { await broker.runIdleMonitor() }),
                    .init(service: RefusalAuditFlush(broker: broker, executor: storeThreads)),
                ] + diskReserveKeeper(broker, executor: storeThreads),
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        do {
            try await group.run()
        } catch let error as VarlinkServerError {
            // The socket could not be taken (another daemon on it, an unsafe directory, something else at the path).
            FileHandle.standardError.write(Data("deviced: error: \(error)\n".utf8))
            throw ExitCode(75)
        } catch {
            FileHandle.standardError.write(Data("deviced: error: \(error)\n".utf8))
            throw ExitCode(69)
        }
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
