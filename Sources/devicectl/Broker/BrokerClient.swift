import BrokerContract
import Foundation
import IdentityClient
import KeychainStore
import SharedDevice
import Synchronization
import Varlink

/// A client of the broker daemon (`deviced`) over its Unix socket, speaking `org.sharedmode.Broker1`.
/// The broker knows the caller by its uid; nothing here names the app. One connection, opened on first
/// use and reopened after the broker restarts; calls are serialized.
final class BrokerClient: Sendable {
    /// The interface the client speaks.
    static let interface = Broker1.name

    /// The broker's socket.
    let socketPath: String
    /// The users the broker may run as (`BrokerSocket.trustedUIDs()`): checked on every new connection
    /// before anything is sent.
    let trustedUIDs: Set<UInt32>
    private let connection = Mutex<VarlinkConnection?>(nil)

    /// A client of the broker at `socketPath` (default: `BrokerSocket.resolve()`). Connects lazily, and
    /// talks only to a broker running as one of `trustedUIDs`.
    init(socketPath: String = BrokerSocket.resolve(), trustedUIDs: Set<UInt32> = BrokerSocket.trustedUIDs()) {
        self.socketPath = socketPath
        self.trustedUIDs = trustedUIDs
    }

    /// Whether a broker answers on the socket now.
    static func isRunning(at socketPath: String = BrokerSocket.resolve()) -> Bool {
        (try? VarlinkConnection(unixSocketPath: socketPath)) != nil
    }

    // MARK: - Calls

    /// Who the broker takes this process to be: its uid, the policy's app (if any) and its groups, and
    /// the state directory (the store) the broker serves.
    func caller() throws(BrokerClientError) -> (uid: UInt32, appID: String?, accessGroups: [String], stateDirectory: String?) {
        let reply = try call(Broker1.GetCaller.self, .init())
        return (UInt32(clamping: reply.uid), reply.appId, reply.accessGroups, reply.stateDirectory)
    }

    /// The broker's state (administrators only: root or the policy's administratorsGroup).
    func status() throws(BrokerClientError) -> BrokerStatus {
        BrokerStatus(try call(Broker1.GetStatus.self, .init()).status)
    }

    /// Tells the broker the worker is active (a kiosk shell or launcher saw input): the idle sign-out
    /// clock starts again and a warning that was out is canceled. Returns the idle clock (`nil` when the
    /// policy sets no idle sign-out).
    @discardableResult
    func reportActivity() throws(BrokerClientError) -> IdleState? {
        try call(Broker1.ReportActivity.self, .init()).idle.map(IdleState.init)
    }

    /// The device's mode and registration (any caller may ask).
    func deviceInformation() throws(BrokerClientError) -> DeviceInformation {
        DeviceInformation(try call(Broker1.GetDeviceInformation.self, .init()).information)
    }

    /// The current and previous account for this app.
    func currentAccount() throws(BrokerClientError) -> CurrentAccount {
        let reply = try call(Broker1.GetCurrentAccount.self, .init())
        return CurrentAccount(current: reply.current.map(DeviceAccount.init), previous: reply.previous.map(DeviceAccount.init))
    }

    /// A token without UI: from the cache, else refreshed by the broker.
    func acquireTokenSilent(scopes: [String], forceRefresh: Bool = false) throws(BrokerClientError) -> AuthenticationResult {
        AuthenticationResult(try call(Broker1.AcquireTokenSilent.self, .init(scopes: scopes, forceRefresh: forceRefresh)).result)
    }

    /// Signs in by device code: `showCode` gets the code to show, then the call waits for the worker.
    func signInWithDeviceCode(scopes: [String], loginHint: String? = nil,
                                     showCode: (DeviceCodeSession) -> Void) throws(BrokerClientError) -> AuthenticationResult {
        try stream(Broker1.SignInWithDeviceCode.self, .init(scopes: scopes, loginHint: loginHint)) { reply throws(BrokerClientError) -> AuthenticationResult? in
            if let verification = reply.verification {
                showCode(try Self.deviceCodeSession(verification, scopes: scopes, method: "SignInWithDeviceCode"))
                return nil
            }
            return reply.result.map(AuthenticationResult.init)
        }
    }

    /// How a worker signs in through the broker (`switchWorker`; `PublicClientApplication` maps its flows to it).
    enum SignInFlow: Sendable {
        /// Device code: `showCode` gets the code to show.
        case deviceCode(showCode: @Sendable (DeviceCodeSession) -> Void)
        /// Browser: the broker listens on the loopback `redirectURI`; `openBrowser` gets the URL to open.
        case browser(redirectURI: String = "http://127.0.0.1/", prompt: String? = nil, timeout: Int = 300, openBrowser: @Sendable (URL) -> Void)
    }

    /// A shift change: the broker signs the current worker out of every app (committed first; `signedOut`
    /// gets who left and how many items went, before the sign-in starts), then the next worker in.
    /// If the sign-in fails the device stays signed out and the error says so.
    func switchWorker(scopes: [String], reason: SignOutReason = .shiftEnd, loginHint: String? = nil, signIn: SignInFlow,
                             signedOut: (_ account: DeviceAccount?, _ itemsRemoved: Int) -> Void = { _, _ in }) throws(BrokerClientError) -> AuthenticationResult {
        var parameters = Broker1.SwitchWorker.Parameters(scopes: scopes, reason: reason.rawValue, loginHint: loginHint)
        switch signIn {
        case .deviceCode:
            parameters.flow = "deviceCode"
        case .browser(let redirectURI, let prompt, let timeout, _):
            parameters.flow = "browser"
            parameters.redirectUri = redirectURI
            parameters.timeout = timeout
            parameters.prompt = prompt
        }
        return try stream(Broker1.SwitchWorker.self, parameters) { reply throws(BrokerClientError) -> AuthenticationResult? in
            if let worker = reply.signedOut {
                signedOut(worker.account.map(DeviceAccount.init), worker.itemsRemoved)
                return nil
            }
            if let verification = reply.verification, case .deviceCode(let showCode) = signIn {
                showCode(try Self.deviceCodeSession(verification, scopes: scopes, method: "SwitchWorker"))
                return nil
            }
            if let address = reply.authorizationUrl, case .browser(_, _, _, let openBrowser) = signIn {
                openBrowser(try Self.authorizationURL(address, method: "SwitchWorker"))
                return nil
            }
            return reply.result.map(AuthenticationResult.init)
        }
    }

    private static func deviceCodeSession(_ verification: Broker1.DeviceCodeVerification, scopes: [String],
                                          method: String) throws(BrokerClientError) -> DeviceCodeSession {
        guard let uri = URL(string: verification.verificationUri) else {
            throw .refused(error: Broker1.qualified(method), message: "the broker sent an unusable device code")
        }
        return DeviceCodeSession(userCode: verification.userCode, verificationURI: uri,
                                 verificationURIComplete: verification.verificationUriComplete.flatMap(URL.init(string:)),
                                 expiresAt: Date().addingTimeInterval(TimeInterval(verification.expiresIn)),
                                 serverMessage: verification.message, scopes: scopes)
    }

    private static func authorizationURL(_ address: String, method: String) throws(BrokerClientError) -> URL {
        guard let url = URL(string: address) else {
            throw .refused(error: Broker1.qualified(method), message: "the broker sent an unusable authorization URL")
        }
        return url
    }

    /// Signs in through the browser: the broker listens on the loopback `redirectURI` (a free port when it
    /// names none); `openBrowser` gets the authorization URL to open; the call returns once the browser
    /// came back (or `timeout` seconds passed: `userCanceled`).
    func signInWithBrowser(scopes: [String], redirectURI: String = "http://127.0.0.1/", loginHint: String? = nil,
                                  prompt: String? = nil, timeout: Int = 300,
                                  openBrowser: (URL) -> Void) throws(BrokerClientError) -> AuthenticationResult {
        let parameters = Broker1.SignInWithBrowser.Parameters(scopes: scopes, redirectUri: redirectURI, loginHint: loginHint, prompt: prompt,
                                                               timeout: timeout)
        return try stream(Broker1.SignInWithBrowser.self, parameters) { reply throws(BrokerClientError) -> AuthenticationResult? in
            if let address = reply.authorizationUrl {
                openBrowser(try Self.authorizationURL(address, method: "SignInWithBrowser"))
                return nil
            }
            return reply.result.map(AuthenticationResult.init)
        }
    }

    /// Signs the current worker out (globally on a shared device).
    func signOut(reason: SignOutReason = .user) throws(BrokerClientError) -> (account: DeviceAccount?, global: Bool, itemsRemoved: Int) {
        let reply = try call(Broker1.SignOut.self, .init(reason: reason.rawValue))
        return (reply.account.map(DeviceAccount.init), reply.global, reply.itemsRemoved)
    }

    // MARK: - Keychain

    /// Adds a generic password in the app's group (or `item.accessGroup`).
    func add(_ item: NewItem) throws(BrokerClientError) -> ItemMetadata {
        let parameters = Broker1.AddGenericPassword.Parameters(
            service: item.service, account: item.account, secret: item.secret.base64EncodedString(), accessGroup: item.accessGroup,
            label: item.label, type: item.type.map { Int($0) }, generic: item.generic?.base64EncodedString())
        return try KeychainItem(call(Broker1.AddGenericPassword.self, parameters).item).metadata
    }

    /// The first matching item with its secret, or every match with `all`.
    func find(_ query: ItemQuery, all: Bool = false) throws(BrokerClientError) -> [KeychainItem] {
        let parameters = Broker1.FindGenericPassword.Parameters(service: query.service, account: query.account, label: query.label,
                                                                 type: query.type.map { Int($0) }, accessGroup: query.accessGroup, all: all ? true : nil)
        var items: [KeychainItem] = []
        for item in try call(Broker1.FindGenericPassword.self, parameters).items { items.append(try KeychainItem(item)) }
        return items
    }

    /// Changes every matching item; returns how many.
    func update(_ query: ItemQuery, with changes: ItemChanges) throws(BrokerClientError) -> Int {
        let parameters = Broker1.UpdateGenericPassword.Parameters(
            service: query.service, account: query.account, label: query.label, type: query.type.map { Int($0) }, accessGroup: query.accessGroup,
            secret: changes.secret?.base64EncodedString(), setService: changes.service, setAccount: changes.account, setLabel: changes.label,
            setType: changes.type.map { Int($0) }, setGeneric: changes.generic?.base64EncodedString())
        return try call(Broker1.UpdateGenericPassword.self, parameters).updated
    }

    /// Deletes every matching item; returns how many.
    func delete(_ query: ItemQuery) throws(BrokerClientError) -> Int {
        try call(Broker1.DeleteGenericPassword.self, .init(service: query.service, account: query.account, label: query.label,
                                                           type: query.type.map { Int($0) }, accessGroup: query.accessGroup)).deleted
    }

    /// The attributes of every matching item (no secrets).
    func metadata(matching query: ItemQuery) throws(BrokerClientError) -> [ItemMetadata] {
        let reply = try call(Broker1.ListGenericPasswords.self, .init(service: query.service, account: query.account, label: query.label,
                                                                      type: query.type.map { Int($0) }, accessGroup: query.accessGroup))
        var items: [ItemMetadata] = []
        for item in reply.items { items.append(try KeychainItem(item).metadata) }
        return items
    }

    // MARK: - Plumbing

    /// One call, one reply.
    func call<Method: VarlinkMethod>(_ method: Method.Type, _ parameters: Method.Parameters) throws(BrokerClientError) -> Method.Reply {
        try stream(method, parameters, more: false) { reply throws(BrokerClientError) in reply }
    }

    /// A call whose replies go to `handle` until it returns a value (or the last reply arrives). A reply
    /// with a field missing or mistyped is `org.varlink.service.InvalidParameter` naming it.
    private func stream<Method: VarlinkMethod, T>(_ method: Method.Type, _ parameters: Method.Parameters, more: Bool = true,
                                                  _ handle: (Method.Reply) throws(BrokerClientError) -> T?) throws(BrokerClientError) -> T {
        let call = VarlinkCall(method, parameters, more: more)
        let member = String(Method.qualifiedName.split(separator: ".").last ?? "")
        let size = call.encoded().count - 1
        guard size <= BrokerSocket.maximumRequestBytes else {
            throw .refused(error: Broker1.ProtocolError.qualifiedName, message: """
                the request is \(size) bytes, over the broker's limit of \(BrokerSocket.maximumRequestBytes) bytes; \
                secrets travel base64-encoded, so a secret through the broker can be at most about 750 KB
                """)
        }
        let outcome: Result<T, BrokerClientError> = connection.withLock { slot in
            do throws(BrokerClientError) {
                let connection = try connected(&slot, sending: call)
                while true {
                    let reply: VarlinkReply
                    do throws(VarlinkConnectionError) {
                        reply = try connection.nextReply()
                    } catch {
                        slot = nil
                        throw BrokerClientError.unavailable("the broker at \(socketPath) went away during the call (\(error.message)); try again")
                    }
                    if let error = reply.error {
                        // After these two the broker closes the connection.
                        if error == Broker1.TooManyConnections.qualifiedName || error == Broker1.ProtocolError.qualifiedName { slot = nil }
                        throw Self.failure(reply)
                    }
                    let decoded: Method.Reply
                    do throws(VarlinkFieldError) {
                        decoded = try Method.Reply(varlinkFields: reply.parameters)
                    } catch {
                        throw BrokerClientError.refused(error: VarlinkReply.invalidParameter(error.field).error ?? "",
                                                        message: "the broker's reply to \(member) has the field \(error.field) missing or mistyped")
                    }
                    if let value = try handle(decoded) { return .success(value) }
                    if !reply.continues {
                        throw BrokerClientError.refused(error: Method.qualifiedName, message: "the broker's last reply to \(member) was incomplete")
                    }
                }
            } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }

    /// Why the listener on `connection` is not a broker this client trusts (nothing is to be sent to it),
    /// or nil when it runs as one of `trustedUIDs`.
    private func refusal(of connection: VarlinkConnection) -> String? {
        let peer: VarlinkPeer
        do throws(VarlinkConnectionError) {
            peer = try connection.peer()
        } catch {
            return "refusing the broker at \(socketPath): \(error.message); nothing was sent"
        }
        guard !trustedUIDs.contains(peer.uid) else { return nil }
        return """
            refusing the broker at \(socketPath): it runs as uid \(peer.uid) (pid \(peer.pid)), not as root or as this user, \
            so it is not the device's broker; nothing was sent. Use the system's socket (\(BrokerSocket.defaultPath)), \
            or trust that user with DEVICECTL_BROKER_UID=\(peer.uid) if it is yours
            """
    }

    /// The open connection with `call` sent on it, reconnecting once if the broker restarted. A new
    /// connection's listener is checked (`refusal(of:)`) before the call goes out.
    private func connected(_ slot: inout VarlinkConnection?, sending call: VarlinkCall) throws(BrokerClientError) -> VarlinkConnection {
        for attempt in 0..<2 {
            let failure: VarlinkConnectionError
            var untrusted: String?
            do throws(VarlinkConnectionError) {
                let connection: VarlinkConnection
                if let open = slot {
                    connection = open
                } else {
                    connection = try VarlinkConnection(unixSocketPath: socketPath)
                    untrusted = refusal(of: connection)
                }
                if untrusted == nil {
                    slot = connection
                    try connection.send(call)
                    return connection
                }
                connection.close()
                failure = VarlinkConnectionError(.permissionDenied, untrusted ?? "")
            } catch {
                failure = error
            }
            if let untrusted { throw .untrustedBroker(untrusted) }
            slot = nil
            if attempt == 1 || failure.code != .connectionLost {
                throw BrokerClientError.unavailable(failure.code == .notRunning
                    ? "the broker daemon is not running (no socket at \(socketPath)); start it with `systemctl start deviced` (or run deviced)"
                    : "cannot reach the broker at \(socketPath): \(failure.message)")
            }
        }
        throw BrokerClientError.unavailable("cannot reach the broker at \(socketPath)")
    }

    /// The client error for an error reply: the interface's errors as the library errors they stand for.
    static func failure(_ reply: VarlinkReply) -> BrokerClientError {
        let name = reply.error ?? ""
        let decoded: Broker1.ErrorReply?
        do throws(VarlinkFieldError) {
            decoded = try Broker1.ErrorReply(reply)
        } catch {
            return .refused(error: name, message: "the broker's error reply has the field \(error.field) missing or mistyped")
        }
        switch decoded {
        case .keychainError(let error)?:
            return .keychain(KeychainError(KeychainError.Code(name: error.code) ?? .ioError, error.message))
        case .accountError(let error)?:
            if let identityName = error.identityCode, let identityCode = IdentityError.Code(rawValue: identityName) {
                return .device(SharedDeviceError(IdentityError(identityCode, error.message)))
            }
            return .device(SharedDeviceError(SharedDeviceError.Code(name: error.code) ?? .store, error.message))
        case .callerNotInPolicy(let error)?:
            return .callerNotInPolicy(uid: UInt32(clamping: error.uid), message: error.message)
        case .tooManyConnections(let error)?:
            return .unavailable(error.explanation)
        case .limitExceeded(let error)?:
            return .refused(error: name, message: error.message)
        case .protocolError(let error)?:
            return .refused(error: name, message: error.reason)
        case nil:
            return .refused(error: name, message: Broker1.refusalMessage(reply))
        }
    }
}
