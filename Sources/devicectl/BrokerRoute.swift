import Foundation
import KeychainStore
import SharedDevice

// The way app-facing commands reach the device: through the broker daemon when it runs and the caller is
// not root (the caller is then the app the policy gives its uid, whatever --app says), else straight to
// the store as before (root, or no daemon).

/// Where an app-facing command's calls go.
enum BrokerRoute {
    /// Through the running broker, which knows the caller by its uid; `appID` is the policy's app for it
    /// (`nil`: none, and every call will be refused and audited by the broker).
    case broker(BrokerClient, appID: String?)
    /// Straight to the store (root, or no broker).
    case direct

    /// The route for this process: the broker when it answers and this process is not root.
    /// - Parameter app: the app `--app` names, if any: through the broker it must be the caller's own
    ///   app (exit 77 otherwise).
    /// - Parameter stateDir: the command's `--state-dir`, if given: a broker serving another store is refused.
    static func choose(app: String?, socket: String? = nil, stateDir: String? = nil) throws -> BrokerRoute {
        guard !StateDirectory.isRoot else { return .direct }
        let path = BrokerSocket.resolve(explicit: socket)
        guard BrokerClient.isRunning(at: path) else { return .direct }
        let client = BrokerClient(socketPath: path)
        let caller = try reportingBrokerErrors { () throws(BrokerClientError) in try client.caller() }
        try checkStateDirectory(stateDir, servedBy: caller.stateDirectory, at: path)
        // A uid the policy does not list goes on to its call, which the broker refuses and audits.
        if let app, let own = caller.appID, app != own {
            throw CLIError(exitCode: .permissionDenied,
                "--app \(app) names another app: the broker knows this process (uid \(caller.uid)) as \(own), and an app may act only as itself; drop --app or run as \(app)'s user")
        }
        return .broker(client, appID: caller.appID)
    }
}

extension BrokerRoute {
    /// The running broker, for an administrator's command that goes through it (so that every app hears of
    /// it at once); `nil` when no broker answers.
    /// - Parameter stateDir: the command's `--state-dir`, if given: a broker serving another store is refused.
    static func runningBroker(socket: String? = nil, stateDir: String? = nil) throws -> BrokerClient? {
        let path = BrokerSocket.resolve(explicit: socket)
        guard BrokerClient.isRunning(at: path) else { return nil }
        let client = BrokerClient(socketPath: path)
        if let chosen = explicitStateDirectory(stateDir) {
            let caller = try reportingBrokerErrors { () throws(BrokerClientError) in try client.caller() }
            try checkStateDirectory(chosen, servedBy: caller.stateDirectory, at: path)
        }
        return client
    }

    /// `--state-dir`, else a non-empty `$DEVICECTL_STATE_DIR`: the store the user named, if any.
    static func explicitStateDirectory(_ option: String?) -> String? {
        if let option, !option.isEmpty { return option }
        let environment = ProcessInfo.processInfo.environment["DEVICECTL_STATE_DIR"] ?? ""
        return environment.isEmpty ? nil : environment
    }

    /// Refuses a broker that serves another store than the one the user named (exit 64): acting through it
    /// would change that other device's state.
    static func checkStateDirectory(_ option: String?, servedBy served: String?, at socket: String) throws {
        guard let chosen = explicitStateDirectory(option), let served else { return }
        let resolve = { (path: String) in URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path }
        guard resolve(chosen) != resolve(served) else { return }
        throw CLIError(exitCode: .usage, """
            the broker at \(socket) serves the store in \(served), not \(chosen) (--state-dir or $DEVICECTL_STATE_DIR); nothing was done. \
            Point --socket (or $DEVICECTL_SOCKET) at the broker of \(chosen), or drop --state-dir
            """)
    }
}

/// Runs a broker call; a refusal is printed and becomes the exit code its library error has in-process.
func reportingBrokerErrors<T>(_ body: () throws(BrokerClientError) -> T) throws -> T {
    do {
        return try body()
    } catch {
        throw CLIError.from(error)
    }
}

extension CLIError {
    static func from(_ error: BrokerClientError) -> CLIError {
        switch error {
        case .keychain(let error): CLIError(exitCode: DevicectlExit.forCode(error.code), error.description)
        case .device(let error): CLIError.from(error)
        case .callerNotInPolicy(_, let message): CLIError(exitCode: .permissionDenied, message)
        case .unavailable(let message), .untrustedBroker(let message): CLIError(exitCode: .unavailable, message)
        case .refused(let name, let message):
            switch name {
            case "org.varlink.service.PermissionDenied": CLIError(exitCode: .permissionDenied, message)
            // A limit of the broker or the policy: the service cannot take this call now.
            case "\(BrokerClient.interface).LimitExceeded": CLIError(exitCode: .unavailable, message)
            default: CLIError(exitCode: .badInput, message)
            }
        }
    }
}

/// The keychain as an app-facing command sees it: the broker (as the caller's own app) or the store
/// (as `--app`, with denials audited).
struct KeychainAccess {
    private let route: BrokerRoute
    private let store: KeychainStore?
    private let identity: AppIdentity?
    private let caller: CallerOptions

    /// The keychain for `caller`, through the broker when it runs (see `BrokerRoute`).
    init(caller: CallerOptions, location: StoreLocation) throws {
        self.caller = caller
        route = try BrokerRoute.choose(app: caller.app, stateDir: location.stateDir)
        switch route {
        case .broker:
            store = nil
            identity = nil
        case .direct:
            guard caller.app != nil else { throw CLIError(exitCode: .usage, "missing --app: name the calling app") }
            let store = try location.open()
            self.store = store
            identity = try caller.identity(in: store)
        }
    }

    func add(_ item: NewItem) throws -> ItemMetadata {
        try perform({ client throws(BrokerClientError) in try client.add(item) },
                    { store, identity throws(KeychainError) in try store.add(item, as: identity) })
    }

    func find(_ query: ItemQuery, all: Bool) throws -> [KeychainItem] {
        try perform({ client throws(BrokerClientError) in try client.find(query, all: all) },
                    { store, identity throws(KeychainError) in all ? try store.findAll(query, as: identity) : [try store.find(query, as: identity)] })
    }

    func update(_ query: ItemQuery, with changes: ItemChanges) throws -> Int {
        try perform({ client throws(BrokerClientError) in try client.update(query, with: changes) },
                    { store, identity throws(KeychainError) in try store.update(query, with: changes, as: identity) })
    }

    func delete(_ query: ItemQuery) throws -> Int {
        try perform({ client throws(BrokerClientError) in try client.delete(query) },
                    { store, identity throws(KeychainError) in try store.delete(query, as: identity) })
    }

    func metadata(matching query: ItemQuery) throws -> [ItemMetadata] {
        try perform({ client throws(BrokerClientError) in try client.metadata(matching: query) },
                    { store, identity throws(KeychainError) in try store.metadata(matching: query, as: identity) })
    }

    private func perform<T>(_ viaBroker: (BrokerClient) throws(BrokerClientError) -> T,
                            _ direct: (KeychainStore, AppIdentity) throws(KeychainError) -> T) throws -> T {
        switch route {
        case .broker(let client, _):
            return try reportingBrokerErrors { () throws(BrokerClientError) in try viaBroker(client) }
        case .direct:
            let store = store!, identity = identity!
            return try caller.reportingDenials(in: store) { () throws(KeychainError) in try direct(store, identity) }
        }
    }
}
