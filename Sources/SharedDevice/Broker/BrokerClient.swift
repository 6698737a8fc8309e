public import Foundation
public import IdentityClient
public import KeychainStore
import Synchronization
import Varlink

/// A client of the broker daemon (`deviced`) over its Unix socket, speaking `org.sharedmode.Broker1`.
/// The broker knows the caller by its uid; nothing here names the app. One connection, opened on first
/// use and reopened after the broker restarts; calls are serialized.
public final class BrokerClient: Sendable {
    /// The interface the client speaks.
    public static let interface = "org.sharedmode.Broker1"

    /// The broker's socket.
    public let socketPath: String
    /// The users the broker may run as (`BrokerSocket.trustedUIDs()`): checked on every new connection
    /// before anything is sent.
    public let trustedUIDs: Set<UInt32>
    private let connection = Mutex<VarlinkConnection?>(nil)

    /// A client of the broker at `socketPath` (default: `BrokerSocket.resolve()`). Connects lazily, and
    /// talks only to a broker running as one of `trustedUIDs`.
    public init(socketPath: String = BrokerSocket.resolve(), trustedUIDs: Set<UInt32> = BrokerSocket.trustedUIDs()) {
        self.socketPath = socketPath
        self.trustedUIDs = trustedUIDs
    }

    /// Whether a broker answers on the socket now.
    public static func isRunning(at socketPath: String = BrokerSocket.resolve()) -> Bool {
        (try? VarlinkConnection(unixSocketPath: socketPath)) != nil
    }

    // MARK: - Calls

    /// Who the broker takes this process to be: its uid, the policy's app (if any) and its groups, and
    /// the state directory (the store) the broker serves.
    public func caller() throws(BrokerClientError) -> (uid: UInt32, appID: String?, accessGroups: [String], stateDirectory: String?) {
        let reply = try call("GetCaller")
        return (UInt32(clamping: reply["uid"]?.int ?? -1), reply["appId"]?.string, (reply["accessGroups"]?.array ?? []).compactMap(\.string),
                reply["stateDirectory"]?.string)
    }

    /// The broker's state (administrators only: root or the policy's administratorsGroup).
    public func status() throws(BrokerClientError) -> BrokerStatus {
        guard let fields = try call("GetStatus")["status"]?.object else {
            throw .refused(error: "\(Self.interface).GetStatus", message: "the broker's status is unusable")
        }
        return BrokerStatus(
            version: fields["version"]?.string ?? "", startedAt: Date(timeIntervalSince1970: fields["startedAt"]?.double ?? 0),
            provisioned: fields["provisioned"]?.bool ?? false, mode: fields["mode"]?.string ?? "private",
            policyID: fields["policyId"]?.string, policySHA256: fields["policySha256"]?.string, current: Self.account(fields["current"]),
            signedInAt: fields["signedInAt"]?.double.map { Date(timeIntervalSince1970: $0) },
            lastAuditSequence: fields["lastAuditSequence"]?.int ?? 0,
            idle: IdleState(fields["idle"]),
            connections: (fields["connections"]?.array ?? []).compactMap { value in
                guard let connection = value.object, let uid = connection["uid"]?.int else { return nil }
                return BrokerStatus.Connection(uid: UInt32(clamping: uid), pid: Int32(clamping: connection["pid"]?.int ?? 0),
                                               appID: connection["appId"]?.string)
            })
    }

    /// Tells the broker the worker is active (a kiosk shell or launcher saw input): the idle sign-out
    /// clock starts again and a warning that was out is canceled. Returns the idle clock (`nil` when the
    /// policy sets no idle sign-out).
    @discardableResult
    public func reportActivity() throws(BrokerClientError) -> IdleState? {
        IdleState(try call("ReportActivity")["idle"])
    }

    /// The device's mode and registration (any caller may ask).
    public func deviceInformation() throws(BrokerClientError) -> DeviceInformation {
        guard let fields = try call("GetDeviceInformation")["information"]?.object, let information = DeviceInformation(brokerFields: fields) else {
            throw .refused(error: "\(Self.interface).GetDeviceInformation", message: "the broker's device information is unusable")
        }
        return information
    }

    /// The current and previous account for this app.
    public func currentAccount() throws(BrokerClientError) -> CurrentAccount {
        let reply = try call("GetCurrentAccount")
        return CurrentAccount(current: Self.account(reply["current"]), previous: Self.account(reply["previous"]))
    }

    /// A token without UI: from the cache, else refreshed by the broker.
    public func acquireTokenSilent(scopes: [String], forceRefresh: Bool = false) throws(BrokerClientError) -> AuthenticationResult {
        let reply = try call("AcquireTokenSilent", ["scopes": .array(scopes.map(VarlinkValue.string)), "forceRefresh": .bool(forceRefresh)])
        return try Self.result(reply["result"])
    }

    /// Signs in by device code: `showCode` gets the code to show, then the call waits for the worker.
    public func signInWithDeviceCode(scopes: [String], loginHint: String? = nil,
                                     showCode: (DeviceCodeSession) -> Void) throws(BrokerClientError) -> AuthenticationResult {
        var parameters: [String: VarlinkValue] = ["scopes": .array(scopes.map(VarlinkValue.string))]
        if let loginHint { parameters["loginHint"] = .string(loginHint) }
        return try stream("SignInWithDeviceCode", parameters) { reply throws(BrokerClientError) -> AuthenticationResult? in
            if let verification = reply["verification"] {
                showCode(try Self.deviceCodeSession(verification, scopes: scopes, method: "SignInWithDeviceCode"))
                return nil
            }
            return try Self.result(reply["result"])
        }
    }

    /// How a worker signs in through the broker (`switchWorker`; `PublicClientApplication` maps its flows to it).
    public enum SignInFlow: Sendable {
        /// Device code: `showCode` gets the code to show.
        case deviceCode(showCode: @Sendable (DeviceCodeSession) -> Void)
        /// Browser: the broker listens on the loopback `redirectURI`; `openBrowser` gets the URL to open.
        case browser(redirectURI: String = "http://127.0.0.1/", prompt: String? = nil, timeout: Int = 300, openBrowser: @Sendable (URL) -> Void)
    }

    /// A shift change: the broker signs the current worker out of every app (committed first; `signedOut`
    /// gets who left and how many items went, before the sign-in starts), then the next worker in.
    /// If the sign-in fails the device stays signed out and the error says so.
    public func switchWorker(scopes: [String], reason: SignOutReason = .shiftEnd, loginHint: String? = nil, signIn: SignInFlow,
                             signedOut: (_ account: DeviceAccount?, _ itemsRemoved: Int) -> Void = { _, _ in }) throws(BrokerClientError) -> AuthenticationResult {
        var parameters: [String: VarlinkValue] = ["scopes": .array(scopes.map(VarlinkValue.string)), "reason": .string(reason.rawValue)]
        if let loginHint { parameters["loginHint"] = .string(loginHint) }
        switch signIn {
        case .deviceCode:
            parameters["flow"] = .string("deviceCode")
        case .browser(let redirectURI, let prompt, let timeout, _):
            parameters["flow"] = .string("browser")
            parameters["redirectUri"] = .string(redirectURI)
            parameters["timeout"] = .int(Int64(timeout))
            if let prompt { parameters["prompt"] = .string(prompt) }
        }
        return try stream("SwitchWorker", parameters) { reply throws(BrokerClientError) -> AuthenticationResult? in
            if let worker = reply["signedOut"]?.object {
                signedOut(Self.account(worker["account"]), Int(worker["itemsRemoved"]?.int ?? 0))
                return nil
            }
            if let verification = reply["verification"], case .deviceCode(let showCode) = signIn {
                showCode(try Self.deviceCodeSession(verification, scopes: scopes, method: "SwitchWorker"))
                return nil
            }
            if let address = reply["authorizationUrl"]?.string, case .browser(_, _, _, let openBrowser) = signIn {
                guard let url = URL(string: address) else {
                    throw .refused(error: "\(Self.interface).SwitchWorker", message: "the broker sent an unusable authorization URL")
                }
                openBrowser(url)
                return nil
            }
            return try Self.result(reply["result"])
        }
    }

    private static func deviceCodeSession(_ value: VarlinkValue, scopes: [String], method: String) throws(BrokerClientError) -> DeviceCodeSession {
        guard let verification = value.object, let uri = verification["verificationUri"]?.string.flatMap(URL.init(string:)),
              let code = verification["userCode"]?.string else {
            throw .refused(error: "\(Self.interface).\(method)", message: "the broker sent an unusable device code")
        }
        return DeviceCodeSession(userCode: code, verificationURI: uri,
                                 verificationURIComplete: verification["verificationUriComplete"]?.string.flatMap(URL.init(string:)),
                                 expiresAt: Date().addingTimeInterval(TimeInterval(verification["expiresIn"]?.int ?? 0)),
                                 serverMessage: verification["message"]?.string, scopes: scopes)
    }

    /// Signs in through the browser: the broker listens on the loopback `redirectURI` (a free port when it
    /// names none); `openBrowser` gets the authorization URL to open; the call returns once the browser
    /// came back (or `timeout` seconds passed: `userCanceled`).
    public func signInWithBrowser(scopes: [String], redirectURI: String = "http://127.0.0.1/", loginHint: String? = nil,
                                  prompt: String? = nil, timeout: Int = 300,
                                  openBrowser: (URL) -> Void) throws(BrokerClientError) -> AuthenticationResult {
        var parameters: [String: VarlinkValue] = ["scopes": .array(scopes.map(VarlinkValue.string)), "redirectUri": .string(redirectURI),
                                                  "timeout": .int(Int64(timeout))]
        if let loginHint { parameters["loginHint"] = .string(loginHint) }
        if let prompt { parameters["prompt"] = .string(prompt) }
        return try stream("SignInWithBrowser", parameters) { reply throws(BrokerClientError) -> AuthenticationResult? in
            if let address = reply["authorizationUrl"]?.string {
                guard let url = URL(string: address) else {
                    throw .refused(error: "\(Self.interface).SignInWithBrowser", message: "the broker sent an unusable authorization URL")
                }
                openBrowser(url)
                return nil
            }
            return try Self.result(reply["result"])
        }
    }

    /// Signs the current worker out (globally on a shared device).
    public func signOut(reason: SignOutReason = .user) throws(BrokerClientError) -> (account: DeviceAccount?, global: Bool, itemsRemoved: Int) {
        let reply = try call("SignOut", ["reason": .string(reason.rawValue)])
        return (Self.account(reply["account"]), reply["global"]?.bool ?? false, Int(reply["itemsRemoved"]?.int ?? 0))
    }

    /// Account changes, pushed by the broker: `onEvent` gets each (kind, reason, sequence) until it
    /// returns false or the broker goes away (then this throws `unavailable`). Blocks: run it on a thread
    /// of its own, with a client of its own.
    /// `onSubscribed` runs once the subscription is live (every later commit will be reported).
    /// `onIdle` gets the idle sign-out's warnings (show a countdown) and their cancellations.
    public func subscribe(onSubscribed: () -> Void = {}, onIdle: (IdleNotice) -> Void = { _ in },
                          onEvent: (AccountChange) -> Bool) throws(BrokerClientError) {
        let _: Bool = try stream("SubscribeAccountChanges", [:]) { reply throws(BrokerClientError) -> Bool? in
            guard let event = reply["event"]?.object, let kindName = event["kind"]?.string else { return nil }
            switch kindName {
            case "idleWarning":
                onIdle(.warning(secondsLeft: Int(event["secondsLeft"]?.int ?? 0)))
                return nil
            case "idleWarningCanceled":
                onIdle(.canceled)
                return nil
            default: break
            }
            let kind: AccountChange.Kind? = switch kindName {
            case "signedIn": .signedIn
            case "signedOut": .signedOutGlobally
            case "switched": .switched
            case "deviceModeChanged": .deviceModeChanged
            default: nil  // `subscribed`: the subscription is live
            }
            guard let kind else {
                if kindName == "subscribed" { onSubscribed() }
                return nil
            }
            let change = AccountChange(kind: kind, account: Self.account(event["current"])?.username, sequence: event["sequence"]?.int ?? 0,
                                       reason: event["reason"]?.string.flatMap(SignOutReason.init(rawValue:)))
            return onEvent(change) ? nil : true
        }
    }

    // MARK: - Keychain

    /// Adds a generic password in the app's group (or `item.accessGroup`).
    public func add(_ item: NewItem) throws(BrokerClientError) -> ItemMetadata {
        var parameters = Self.selection(ItemQuery(accessGroup: item.accessGroup, service: item.service, account: item.account,
                                                  label: item.label, type: item.type))
        parameters["secret"] = .string(item.secret.base64EncodedString())
        if let generic = item.generic { parameters["generic"] = .string(generic.base64EncodedString()) }
        return try Self.item(call("AddGenericPassword", parameters)["item"]).metadata
    }

    /// The first matching item with its secret, or every match with `all`.
    public func find(_ query: ItemQuery, all: Bool = false) throws(BrokerClientError) -> [KeychainItem] {
        var parameters = Self.selection(query)
        if all { parameters["all"] = .bool(true) }
        let reply = try call("FindGenericPassword", parameters)
        var items: [KeychainItem] = []
        for value in reply["items"]?.array ?? [] { items.append(try Self.item(value)) }
        return items
    }

    /// Changes every matching item; returns how many.
    public func update(_ query: ItemQuery, with changes: ItemChanges) throws(BrokerClientError) -> Int {
        var parameters = Self.selection(query)
        if let secret = changes.secret { parameters["secret"] = .string(secret.base64EncodedString()) }
        if let service = changes.service { parameters["setService"] = .string(service) }
        if let account = changes.account { parameters["setAccount"] = .string(account) }
        if let label = changes.label { parameters["setLabel"] = .string(label) }
        if let type = changes.type { parameters["setType"] = .int(Int64(type)) }
        if let generic = changes.generic { parameters["setGeneric"] = .string(generic.base64EncodedString()) }
        return Int(try call("UpdateGenericPassword", parameters)["updated"]?.int ?? 0)
    }

    /// Deletes every matching item; returns how many.
    public func delete(_ query: ItemQuery) throws(BrokerClientError) -> Int {
        Int(try call("DeleteGenericPassword", Self.selection(query))["deleted"]?.int ?? 0)
    }

    /// The attributes of every matching item (no secrets).
    public func metadata(matching query: ItemQuery) throws(BrokerClientError) -> [ItemMetadata] {
        var items: [ItemMetadata] = []
        for value in try call("ListGenericPasswords", Self.selection(query))["items"]?.array ?? [] {
            items.append(try Self.item(value).metadata)
        }
        return items
    }

    // MARK: - Plumbing

    /// One call, one reply.
    func call(_ member: String, _ parameters: [String: VarlinkValue] = [:]) throws(BrokerClientError) -> [String: VarlinkValue] {
        try stream(member, parameters, more: false) { reply throws(BrokerClientError) in reply }
    }

    /// A call whose replies go to `handle` until it returns a value (or the last reply arrives).
    private func stream<T>(_ member: String, _ parameters: [String: VarlinkValue], more: Bool = true,
                           _ handle: ([String: VarlinkValue]) throws(BrokerClientError) -> T?) throws(BrokerClientError) -> T {
        let call = VarlinkCall(method: "\(Self.interface).\(member)", parameters: parameters, more: more)
        let size = call.encoded().count - 1
        guard size <= BrokerSocket.maximumRequestBytes else {
            throw .refused(error: "\(Self.interface).ProtocolError", message: """
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
                        if error == "\(Self.interface).TooManyConnections" || error == "\(Self.interface).ProtocolError" { slot = nil }
                        throw Self.failure(error, reply.parameters)
                    }
                    if let value = try handle(reply.parameters) { return .success(value) }
                    if !reply.continues {
                        throw BrokerClientError.refused(error: "\(Self.interface).\(member)", message: "the broker's last reply to \(member) was incomplete")
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

    static func failure(_ error: String, _ parameters: [String: VarlinkValue]) -> BrokerClientError {
        let message = parameters["message"]?.string ?? error
        switch error {
        case "\(interface).KeychainError":
            let code = parameters["code"]?.string.flatMap(KeychainError.Code.init(name:)) ?? .ioError
            return .keychain(KeychainError(code, message))
        case "\(interface).AccountError":
            if let identityName = parameters["identityCode"]?.string, let identityCode = IdentityError.Code(rawValue: identityName) {
                return .device(SharedDeviceError(IdentityError(identityCode, message)))
            }
            let code = parameters["code"]?.string.flatMap(SharedDeviceError.Code.init(name:)) ?? .store
            return .device(SharedDeviceError(code, message))
        case "\(interface).CallerNotInPolicy":
            return .callerNotInPolicy(uid: UInt32(clamping: parameters["uid"]?.int ?? -1), message: message)
        case "\(interface).TooManyConnections":
            let limit = parameters["limit"]?.int ?? 0
            switch parameters["scope"]?.string {
            case "user":
                return .unavailable("the broker refused this connection: this user already holds \(limit) connections to it (the policy's limits); close some or try again later")
            case "reserved":
                return .unavailable("the broker refused this connection: its last free connections are kept for administrators; try again later")
            default:
                return .unavailable("the broker at its limit of \(limit) connections refused this one; try again later")
            }
        case "org.varlink.service.PermissionDenied":
            return .refused(error: error, message: "the broker refused: only an administrator (root, or the policy's administratorsGroup) may do this")
        case "org.varlink.service.InvalidParameter":
            return .refused(error: error, message: "the broker refused parameter \(parameters["parameter"]?.string ?? "?")")
        default:
            return .refused(error: error, message: message)
        }
    }

    private static func selection(_ query: ItemQuery) -> [String: VarlinkValue] {
        var parameters: [String: VarlinkValue] = [:]
        if let group = query.accessGroup { parameters["accessGroup"] = .string(group) }
        if let service = query.service { parameters["service"] = .string(service) }
        if let account = query.account { parameters["account"] = .string(account) }
        if let label = query.label { parameters["label"] = .string(label) }
        if let type = query.type { parameters["type"] = .int(Int64(type)) }
        return parameters
    }

    static func account(_ value: VarlinkValue?) -> DeviceAccount? {
        guard let fields = value?.object, let home = fields["homeAccountId"]?.string else { return nil }
        return DeviceAccount(homeAccountID: home, environment: fields["environment"]?.string ?? "", realm: fields["realm"]?.string ?? "",
                             username: fields["username"]?.string, name: fields["name"]?.string,
                             localAccountID: fields["localAccountId"]?.string)
    }

    private static func result(_ value: VarlinkValue?) throws(BrokerClientError) -> AuthenticationResult {
        guard let fields = value?.object, let token = fields["accessToken"]?.string, let account = account(fields["account"]) else {
            throw .refused(error: "\(interface).AuthenticationResult", message: "the broker's reply carries no usable result")
        }
        return AuthenticationResult(accessToken: token, scopes: (fields["scopes"]?.array ?? []).compactMap(\.string),
                                    expiresOn: fields["expiresOn"]?.int.map { Date(timeIntervalSince1970: TimeInterval($0)) },
                                    account: account, idToken: nil,
                                    source: fields["source"]?.string.flatMap(AuthenticationResult.Source.init(rawValue:)) ?? .cache,
                                    correlationID: fields["correlationId"]?.string ?? "")
    }

    private static func item(_ value: VarlinkValue?) throws(BrokerClientError) -> KeychainItem {
        guard let fields = value?.object, let group = fields["accessGroup"]?.string, let service = fields["service"]?.string,
              let account = fields["account"]?.string else {
            throw .refused(error: "\(interface).KeychainItem", message: "the broker's reply carries no usable item")
        }
        let metadata = ItemMetadata(
            accessGroup: group, service: service, account: account, type: fields["type"]?.int.map { UInt32(clamping: $0) },
            generic: fields["generic"]?.string.flatMap { Data(base64Encoded: $0) }, label: fields["label"]?.string, creator: nil,
            creationDate: Date(timeIntervalSince1970: fields["creationDate"]?.double ?? 0),
            modificationDate: Date(timeIntervalSince1970: fields["modificationDate"]?.double ?? 0))
        return KeychainItem(metadata: metadata, secret: fields["secret"]?.string.flatMap { Data(base64Encoded: $0) } ?? Data())
    }
}
