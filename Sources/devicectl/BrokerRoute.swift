import DeviceLocations
import Foundation
import KeychainStore
import Logging
import SharedDevice

// The way app-facing commands reach the device, decided once per command: through the broker daemon when
// it runs and the caller is not root (the caller is then the app the policy gives its uid, whatever --app
// says), with the client an app links; else the engine on the store (root, or no daemon).

/// Where an app-facing command's calls go.
enum BrokerRoute {
    /// Through the running broker, which knows the caller by its uid; `appID` is the policy's app for it
    /// (`nil`: none, and every call will be refused and audited by the broker).
    case broker(BrokerConnection, appID: String?)
    /// The engine on the store (root, or no broker).
    case direct

    /// The route for this process: the broker when it answers and this process is not root.
    /// - Parameter app: the app `--app` names, if any: through the broker it must be the caller's own
    ///   app (exit 77 otherwise).
    /// - Parameter stateDir: the command's `--state-dir`, if given: a broker serving another store is refused.
    static func choose(app: String?, socket: String? = nil, stateDir: String? = nil, logger: Logger) async throws -> BrokerRoute {
        guard !DeviceLocations.runsAsRoot else { return .direct }
        let path = DeviceLocations.brokerSocket(explicit: socket)
        guard BrokerConnection.isListening(at: path) else { return .direct }
        let broker = BrokerConnection(socketPath: path, logger: logger)
        let caller = try await broker.caller()
        try checkStateDirectory(stateDir, servedBy: caller.stateDirectory, at: path)
        try refuseAnotherApp(app, own: caller.appID, uid: caller.uid)
        return .broker(broker, appID: caller.appID)
    }

    /// Refuses `--app` naming another app than the one the broker knows this process as (exit 77): an app
    /// acts only as itself. A uid the policy does not list goes on to its call, which the broker refuses and audits.
    static func refuseAnotherApp(_ app: String?, own: String?, uid: Int) throws {
        guard let app, let own, app != own else { return }
        throw CLIError(exitCode: .permissionDenied,
            "--app \(app) names another app: the broker knows this process (uid \(uid)) as \(own), and an app may act only as itself; drop --app or run as \(app)'s user")
    }

    /// The running broker, for an administrator's command that goes through it (so that every app hears of
    /// it at once); `nil` when no broker answers.
    /// - Parameter stateDir: the command's `--state-dir`, if given: a broker serving another store is refused.
    static func runningBroker(socket: String? = nil, stateDir: String? = nil, logger: Logger) async throws -> BrokerConnection? {
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
        let resolve = { (path: String) in URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path }
        guard resolve(chosen) != resolve(served) else { return }
        throw CLIError(exitCode: .usage, """
            the broker at \(socket) serves the store in \(served), not \(chosen) (--state-dir or $DEVICECTL_STATE_DIR); nothing was done. \
            Point --socket (or $DEVICECTL_SOCKET) at the broker of \(chosen), or drop --state-dir
            """)
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

    /// The keychain for `caller`, through the broker when it runs (see `BrokerRoute`).
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
        case .store(let store, let identity): try caller.reportingDenials(in: store) { () throws(KeychainError) in try store.add(item, as: identity) }
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
            try caller.reportingDenials(in: store) { () throws(KeychainError) in try store.update(query, with: changes, as: identity) }
        }
    }

    func delete(_ query: ItemQuery) async throws -> Int {
        switch backend {
        case .broker(let broker): try await broker.delete(query)
        case .store(let store, let identity): try caller.reportingDenials(in: store) { () throws(KeychainError) in try store.delete(query, as: identity) }
        }
    }

    func metadata(matching query: ItemQuery) async throws -> [ItemMetadata] {
        switch backend {
        case .broker(let broker): try await broker.metadata(matching: query)
        case .store(let store, let identity):
            try caller.reportingDenials(in: store) { () throws(KeychainError) in try store.metadata(matching: query, as: identity) }
        }
    }
}
