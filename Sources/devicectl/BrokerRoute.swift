import DeviceLocations
import Foundation
import KeychainStore
import Logging
import SharedDevice

// The way app-facing commands reach the device, decided once per command. An app's user (anyone but root)
// goes through the broker daemon only, with the client an app links: the broker knows the caller by its uid
// (the app the policy gives it, whatever --app says). With no broker there is nothing to fall back to: the
// command names the socket, why it could not connect and how to start the broker, and creates nothing.
// Root is the device's administrator and never an app: its --app commands act for that app on the store
// directly, whether or not a broker runs (the broker acts only for the app a caller's uid is; it hears of
// the changes through the store's change signal, as of any other process's).

/// Where an app-facing command's calls go.
enum BrokerRoute {
    /// Through the running broker, which knows the caller by its uid; `appID` is the policy's app for it
    /// (`nil`: none, and every call will be refused and audited by the broker).
    case broker(BrokerConnection, appID: String?)
    /// The engine on the store, as the administrator acting for `--app` (root only).
    case direct

    /// The route for this process: the engine for root, else the broker, which must answer.
    /// - Parameter app: the app `--app` names, if any: through the broker it must be the caller's own
    ///   app (exit 77 otherwise).
    /// - Parameter stateDir: the command's `--state-dir`, if given: a broker serving another store is refused.
    /// - Throws: exit 69 naming the socket, the cause and how to start the broker when none answers.
    static func choose(
        app: String?,
        socket: String? = nil,
        stateDir: String? = nil,
        logger: Logger
    ) async throws -> BrokerRoute {
        guard !DeviceLocations.runsAsRoot else { return .direct }
        let (broker, caller) = try await requiredBroker(socket: socket, stateDir: stateDir, logger: logger)
        try refuseAnotherApp(app, own: caller.appID, uid: caller.uid)
        return .broker(broker, appID: caller.appID)
    }

    /// The broker, which must answer, and who it takes this process to be.
    /// - Throws: exit 69 naming the socket, why it could not connect and how to start the broker; exit 64
    ///   for a broker serving another store than `--state-dir`.
    static func requiredBroker(
        socket: String? = nil,
        stateDir: String? = nil,
        logger: Logger
    ) async throws
        -> (BrokerConnection, BrokerConnection.Caller)
    {
        let path = DeviceLocations.brokerSocket(explicit: socket)
        let broker = BrokerConnection(socketPath: path, logger: logger)
        let caller: BrokerConnection.Caller
        do {
            caller = try await broker.caller()
        } catch let error as CLIError where error.exitCode == .unavailable {
            throw CLIError(
                exitCode: .unavailable,
                """
                \(error.description). devicectl's app commands go through the broker only (root's --app commands use \
                the store); nothing was done and nothing was created
                """
            )
        }
        try checkStateDirectory(stateDir, servedBy: caller.stateDirectory, at: path)
        return (broker, caller)
    }

    /// Refuses `--app` naming another app than the one the broker knows this process as (exit 77): an app
    /// acts only as itself. A uid the policy does not list goes on to its call, which the broker refuses and audits.
    static func refuseAnotherApp(_ app: String?, own: String?, uid: Int) throws {
        guard let app, let own, app != own else { return }
        throw CLIError(
            exitCode: .permissionDenied,
            "--app \(app) names another app: the broker knows this process (uid \(uid)) as \(own), and an app may act only as itself; drop --app or run as \(app)'s user"
        )
    }

    /// The running broker, for an administrator's command that goes through it (so that every app hears of
    /// it at once); `nil` when no broker answers.
    /// - Parameter stateDir: the command's `--state-dir`, if given: a broker serving another store is refused.
    static func runningBroker(
        socket: String? = nil,
        stateDir: String? = nil,
        logger: Logger
    ) async throws -> BrokerConnection? {
        let path = DeviceLocations.brokerSocket(explicit: socket)
        guard BrokerConnection.isListening(at: path) else { return nil }
        let broker = BrokerConnection(socketPath: path, logger: logger)
        if let chosen = DeviceLocations.namedStateDirectory(explicit: stateDir) {
            try checkStateDirectory(chosen, servedBy: try await broker.caller().stateDirectory, at: path)
        }
        return broker
    }

    /// Refuses a broker that serves another store than the one the user named (exit 64): acting through it
    /// would change that other device's state.
    static func checkStateDirectory(_ option: String?, servedBy served: String?, at socket: String) throws {
        guard let chosen = DeviceLocations.namedStateDirectory(explicit: option), let served else { return }
        let resolve = { (path: String) in URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path
        }
        guard resolve(chosen) != resolve(served) else { return }
        throw CLIError(
            exitCode: .usage,
            """
            the broker at \(socket) serves the store in \(served), not \(chosen) (--state-dir or $DEVICECTL_STATE_DIR); nothing was done. \
            Point --socket (or $DEVICECTL_SOCKET) at the broker of \(chosen), or drop --state-dir
            """
        )
    }
}

/// The keychain as an app-facing command sees it: the broker (as the caller's own app) or the store
/// (as `--app`, with denials audited).
struct KeychainAccess {
    private enum Backend {
        case broker(BrokerConnection)
        case store(KeychainStore, AppIdentity)
    }

    private let backend: Backend
    private let caller: CallerOptions

    /// The keychain for `caller`: through the broker, or for root the store (see `BrokerRoute`).
    init(caller: CallerOptions, location: StoreLocation) async throws {
        self.caller = caller
        switch try await BrokerRoute.choose(app: caller.app, stateDir: location.stateDir, logger: location.logger) {
        case .broker(let broker, _):
            backend = .broker(broker)
        case .direct:
            guard caller.app != nil else { throw CLIError(exitCode: .usage, "missing --app: name the calling app") }
            let store = try location.open()
            backend = .store(store, try caller.identity(in: store))
        }
    }

    func add(_ item: NewItem) async throws -> ItemMetadata {
        switch backend {
        case .broker(let broker): try await broker.add(item)
        case .store(let store, let identity):
            try caller.reportingDenials(in: store) { () throws(KeychainError) in try store.add(item, as: identity) }
        }
    }

    func find(_ query: ItemQuery, all: Bool) async throws -> [KeychainItem] {
        switch backend {
        case .broker(let broker):
            try await broker.find(query, all: all)
        case .store(let store, let identity):
            try caller.reportingDenials(in: store) { () throws(KeychainError) in
                all ? try store.findAll(query, as: identity) : [try store.find(query, as: identity)]
            }
        }
    }

    func update(_ query: ItemQuery, with changes: ItemChanges) async throws -> Int {
        switch backend {
        case .broker(let broker): try await broker.update(query, with: changes)
        case .store(let store, let identity):
            try caller.reportingDenials(in: store) { () throws(KeychainError) in
                try store.update(query, with: changes, as: identity)
            }
        }
    }

    func delete(_ query: ItemQuery) async throws -> Int {
        switch backend {
        case .broker(let broker): try await broker.delete(query)
        case .store(let store, let identity):
            try caller.reportingDenials(in: store) { () throws(KeychainError) in try store.delete(query, as: identity) }
        }
    }

    func metadata(matching query: ItemQuery) async throws -> [ItemMetadata] {
        switch backend {
        case .broker(let broker): try await broker.metadata(matching: query)
        case .store(let store, let identity):
            try caller.reportingDenials(in: store) { () throws(KeychainError) in
                try store.metadata(matching: query, as: identity)
            }
        }
    }
}
