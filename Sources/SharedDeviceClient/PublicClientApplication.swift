import BrokerContract
public import Foundation
public import Logging
public import NIOCore
import NIOPosix

/// An app's way to the device's broker (`deviced`), shaped like MSAL's PublicClientApplication with the
/// Authenticator broker: device information, the current and previous account, sign-in, tokens without UI,
/// sign-out, account changes, and the app's keychain groups.
///
/// Everything goes through the broker; this type holds no token and opens no store. The broker knows the
/// app by its uid (the kernel tells it), so there is nothing to configure but where the broker listens.
/// A single-reply call runs on one of a few pooled connections, a call with more replies (a sign-in, the
/// account changes) on a connection of its own: cancelling the calling task closes the call's connection, and the broker stops
/// the call (a sign-in in progress caches nothing).
public final class PublicClientApplication: Sendable {
    /// Where the broker listens and whom the client trusts to be it.
    public let endpoint: BrokerEndpoint
    private let broker: BrokerCall

    /// An application for the broker at `endpoint` (by default the system's, `/run/devicectl/broker.sock`).
    ///
    /// - Parameters:
    ///   - logger: gets the client's own diagnostics (never a token or a secret): `debug`, and a `warning`
    ///     when it refuses an untrusted broker. By default the task-local `Logger.current` (the logger of the
    ///     enclosing swift-log `withLogger`, else swift-log's process-wide default), as the other libraries
    ///     take theirs: the client never makes a logger of its own.
    ///   - eventLoopGroup: runs the connections (nil: SwiftNIO's shared singleton group).
    public init(endpoint: BrokerEndpoint = BrokerEndpoint(), logger: Logger = Logger.current, eventLoopGroup: (any EventLoopGroup)? = nil) {
        self.endpoint = endpoint
        broker = BrokerCall(endpoint: endpoint, group: eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton, logger: logger)
    }

    // MARK: - Device and accounts

    /// Who the broker takes this process for (by its uid, from the kernel) and the access groups it has.
    public func caller() async throws(SharedDeviceClientError) -> CallerIdentity {
        try await broker.run(Broker1.GetCaller.self, .init()) { reply throws(SharedDeviceClientError) in
            CallerIdentity(uid: reply.uid, appID: reply.appId, accessGroups: reply.accessGroups, administrator: reply.administrator,
                           stateDirectory: reply.stateDirectory)
        }
    }

    /// Whether the device is shared or private, and its registration (MSAL's getDeviceInformation).
    public func deviceInformation() async throws(SharedDeviceClientError) -> DeviceInformation {
        try await broker.run(Broker1.GetDeviceInformation.self, .init()) { reply throws(SharedDeviceClientError) in
            try DeviceInformation(reply.information)
        }
    }

    /// The device's current worker for this app and the one before (MSAL's getCurrentAccount).
    /// `msalClientID`: as in `acquireTokenSilent`.
    public func currentAccount(msalClientID: String? = nil) async throws(SharedDeviceClientError) -> CurrentAccount {
        try await broker.run(Broker1.GetCurrentAccount.self, .init(msalClientId: msalClientID)) { reply throws(SharedDeviceClientError) in
            CurrentAccount(current: reply.current.map(Account.init), previous: reply.previous.map(Account.init))
        }
    }

    /// The accounts this app holds (MSAL's allAccounts): on a shared device the signed-in worker's, one per
    /// Azure AD B2C user flow they signed in through; empty when nobody is signed in.
    public func accounts() async throws(SharedDeviceClientError) -> [Account] {
        try await broker.run(Broker1.GetAccounts.self, .init()) { reply throws(SharedDeviceClientError) in
            reply.accounts.map(Account.init)
        }
    }

    /// The account of the Azure AD B2C user flow `policy` (MSAL's sample `getAccountByPolicy`), nil when
    /// the worker has not signed in through it.
    public func account(forPolicy policy: String) async throws(SharedDeviceClientError) -> Account? {
        try await accounts().first { $0.isAccount(ofPolicy: policy) }
    }

    /// Tells the broker the worker is active (input on the kiosk): the idle sign-out's clock starts over
    /// and a warning out is canceled. Returns the clock, nil when the policy has no idle sign-out.
    @discardableResult
    public func reportActivity() async throws(SharedDeviceClientError) -> IdleState? {
        try await broker.run(Broker1.ReportActivity.self, .init()) { reply throws(SharedDeviceClientError) in
            .some(reply.idle.map(IdleState.init))
        }
    }

    // MARK: - Tokens

    /// A token for `scopes` without UI (MSAL's acquireTokenSilent): the broker's cached access token, else
    /// a refresh. Throws `account` with `interactionRequired` (-50002) when a sign-in is needed.
    /// `msalClientID`: the MSAL client id of a request that came through Microsoft's broker protocol (see
    /// `InteractiveTokenParameters.msalClientID`); the result then carries the ID token. `authority`: one of
    /// the device policy's `knownAuthorities` (an Azure AD B2C user flow, MSAL's `parameters.authority`):
    /// that flow's token, under the worker's account of that flow.
    public func acquireTokenSilent(scopes: [String], forceRefresh: Bool = false, msalClientID: String? = nil,
                                   authority: String? = nil) async throws(SharedDeviceClientError) -> AuthenticationResult {
        try await broker.run(Broker1.AcquireTokenSilent.self, .init(scopes: scopes, forceRefresh: forceRefresh ? true : nil, msalClientId: msalClientID,
                                                                    authority: authority)) {
            reply throws(SharedDeviceClientError) in
            try AuthenticationResult(reply.result)
        }
    }

    /// Signs a worker in (MSAL's acquireToken): the broker runs the sign-in, the app shows the device code
    /// or opens the browser when `parameters.flow` is called. In shared mode the worker is then signed in
    /// to every app on the device.
    public func acquireToken(_ parameters: InteractiveTokenParameters) async throws(SharedDeviceClientError) -> AuthenticationResult {
        switch parameters.flow {
        case .password(let username, let password):
            return try await signIn(username: username, password: password, scopes: parameters.scopes, msalClientID: parameters.msalClientID,
                                    authority: parameters.authority)
        case .deviceCode(let showCode):
            return try await broker.run(Broker1.SignInWithDeviceCode.self, .init(scopes: parameters.scopes, loginHint: parameters.loginHint,
                                                                                      msalClientId: parameters.msalClientID, authority: parameters.authority),
                                        more: true) { reply throws(SharedDeviceClientError) in
                if let result = reply.result { return try AuthenticationResult(result) }
                if let verification = reply.verification { await showCode(DeviceCodeVerification(verification)) }
                return nil
            }
        case .browser(let redirectURI, let prompt, let timeout, let openBrowser):
            let call = Broker1.SignInWithBrowser.Parameters(scopes: parameters.scopes, redirectUri: redirectURI, loginHint: parameters.loginHint,
                                                            prompt: prompt, timeout: timeout, msalClientId: parameters.msalClientID,
                                                            authority: parameters.authority)
            return try await broker.run(Broker1.SignInWithBrowser.self, call, more: true) { reply throws(SharedDeviceClientError) in
                if let result = reply.result { return try AuthenticationResult(result) }
                if let address = reply.authorizationUrl {
                    guard let url = URL(string: address) else {
                        throw .refused(error: "org.varlink.service.InvalidParameter", message: "the broker's authorizationUrl is not a URL")
                    }
                    await openBrowser(url)
                }
                return nil
            }
        }
    }

    /// Signs a worker in with the username and password the app's own screen took (MSAL native auth's
    /// `signIn(username:password:)`; the resource-owner password grant at an OpenID Connect provider).
    /// Only where the device policy's `authority.flows` lists `password`. Throws `account` with
    /// `identityCode` `invalid_credentials` for a wrong username or password (nothing cached, the failure
    /// audited), `limitExceeded` `passwordBackoff` while the device holds password sign-ins back after
    /// repeated failures, `account` `flowNotAllowed` where the policy does not allow it.
    public func signIn(username: String, password: String, scopes: [String], msalClientID: String? = nil,
                       authority: String? = nil) async throws(SharedDeviceClientError) -> AuthenticationResult {
        try await broker.run(Broker1.SignInWithPassword.self, .init(scopes: scopes, username: username, password: password,
                                                                    msalClientId: msalClientID, authority: authority)) { reply throws(SharedDeviceClientError) in
            try AuthenticationResult(reply.result)
        }
    }

    /// Starts a native sign-in (MSAL native auth's `signIn(username:)`; only where the device policy's
    /// `authority.flows` lists `nativeAuth`, at a Microsoft Entra External ID authority): says whether the
    /// password or the emailed code is next, and where the code went.
    ///
    /// With `switchReason` the sign-in is the next worker of a shift change: the current worker is signed
    /// out of every app once the authority took the username (`NativeSignIn.signedOut` says who), and
    /// `submitNativeSignIn` signs the next one in under the same correlation id.
    public func startNativeSignIn(username: String, msalClientID: String? = nil,
                                  switchReason: SignOutReason? = nil) async throws(SharedDeviceClientError) -> NativeSignIn {
        try await broker.run(Broker1.StartNativeSignIn.self, .init(username: username, msalClientId: msalClientID, switchReason: switchReason?.rawValue)) {
            reply throws(SharedDeviceClientError) in
            var signIn = try NativeSignIn(reply.next)
            signIn.signedOut = reply.signedOut.map { SignOutResult(account: $0.account.map(Account.init), global: true, itemsRemoved: $0.itemsRemoved) }
            return signIn
        }
    }

    /// Sends a new one-time code for a native sign-in waiting for one (the previous code stops working).
    public func resendNativeSignInCode(_ signIn: NativeSignIn) async throws(SharedDeviceClientError) -> NativeSignIn {
        try await broker.run(Broker1.ResendNativeSignInCode.self, .init(signInId: signIn.id)) { reply throws(SharedDeviceClientError) in
            try NativeSignIn(reply.next)
        }
    }

    /// Finishes a native sign-in with what the worker typed (`password` or `code`, as `signIn.next` asks).
    /// A wrong code is `account` with `identityCode` `invalid_code`, and the sign-in stays open.
    public func submitNativeSignIn(_ signIn: NativeSignIn, password: String? = nil, code: String? = nil,
                                   scopes: [String]) async throws(SharedDeviceClientError) -> AuthenticationResult {
        try await broker.run(Broker1.SubmitNativeSignIn.self, .init(signInId: signIn.id, scopes: scopes, password: password, code: code)) {
            reply throws(SharedDeviceClientError) in
            try AuthenticationResult(reply.result)
        }
    }

    /// A shift change in one call: the current worker is signed out of every app (committed first), then
    /// the next worker signs in as `parameters.flow` shows. If the sign-in fails or is cancelled, the
    /// device stays signed out. `signedOut`, if given, hears who left (and how many of their items went)
    /// as soon as the sign-out is committed, before the next worker's sign-in starts.
    public func switchWorker(_ parameters: InteractiveTokenParameters, reason: SignOutReason = .shiftEnd,
                             signedOut reportSignOut: (@Sendable (SignOutResult) async -> Void)? = nil) async throws(SharedDeviceClientError) -> WorkerSwitch {
        var call = Broker1.SwitchWorker.Parameters(scopes: parameters.scopes, reason: reason.rawValue, loginHint: parameters.loginHint)
        let showCode: (@Sendable (DeviceCodeVerification) async -> Void)?, openBrowser: (@Sendable (URL) async -> Void)?
        switch parameters.flow {
        case .deviceCode(let show):
            (call.flow, showCode, openBrowser) = (.deviceCode, show, nil)
        case .browser(let redirectURI, let prompt, let timeout, let open):
            (call.flow, call.redirectUri, call.prompt, call.timeout, showCode, openBrowser) = (.browser, redirectURI, prompt, timeout, nil, open)
        case .password(let username, let password):
            (call.flow, call.loginHint, call.password, showCode, openBrowser) = (.password, username, password, nil, nil)
        }
        let signedOut = SignedOutBox()
        return try await broker.run(Broker1.SwitchWorker.self, call, more: true) { reply throws(SharedDeviceClientError) in
            if let worker = reply.signedOut {
                let result = SignOutResult(account: worker.account.map(Account.init), global: true, itemsRemoved: worker.itemsRemoved)
                signedOut.value = result
                await reportSignOut?(result)
            }
            if let verification = reply.verification { await showCode?(DeviceCodeVerification(verification)) }
            if let address = reply.authorizationUrl, let url = URL(string: address) { await openBrowser?(url) }
            guard let result = reply.result else { return nil }
            return WorkerSwitch(signedOut: signedOut.value ?? SignOutResult(account: nil, global: true, itemsRemoved: 0),
                                result: try AuthenticationResult(result))
        }
    }

    /// Signs the current worker out; in shared mode from every app on the device. The counts are the
    /// broker's.
    public func signOut(reason: SignOutReason = .user) async throws(SharedDeviceClientError) -> SignOutResult {
        try await broker.run(Broker1.SignOut.self, .init(reason: reason.rawValue)) { reply throws(SharedDeviceClientError) in
            SignOutResult(account: reply.account.map(Account.init), global: reply.global, itemsRemoved: reply.itemsRemoved)
        }
    }

    /// Every account change and idle warning the broker pushes, from the moment of the call: the sequence
    /// returns at once, its first event is `subscribed` (from then on nothing is missed). It ends when the
    /// consumer stops iterating (the subscription's connection is closed) and throws
    /// `SharedDeviceClientError` when the broker goes away.
    public func accountChanges() -> AsyncThrowingStream<AccountEvent, any Error> {
        let (events, continuation) = AsyncThrowingStream<AccountEvent, any Error>.makeStream()
        let broker = broker
        let subscription = Task {
            do {
                let _: Never = try await broker.run(Broker1.SubscribeAccountChanges.self, .init(), more: true) { reply throws(SharedDeviceClientError) -> Never? in
                    if let event = try AccountEvent(reply.event) {
                        continuation.yield(event)
                    } else {
                        broker.logger.debug("skipping an account event of a kind this client does not know", metadata: ["kind": "\(reply.event.kind)"])
                    }
                    return nil
                }
            } catch SharedDeviceClientError.Code.cancelled {
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in subscription.cancel() }
        return events
    }

    // MARK: - Keychain

    /// Adds a generic password to `accessGroup` (nil: the app's first group). Throws `keychain` -25299 when
    /// one with this service and account exists there, -34018 for a group the policy does not give the app,
    /// -34 over the app's quota.
    @discardableResult
    public func addGenericPassword(service: String, account: String, secret: Data, accessGroup: String? = nil, label: String? = nil,
                                   type: UInt32? = nil, generic: Data? = nil) async throws(SharedDeviceClientError) -> KeychainItem {
        let parameters = Broker1.AddGenericPassword.Parameters(service: service, account: account, secret: secret.base64EncodedString(),
                                                               accessGroup: accessGroup, label: label, type: type.map(Int.init),
                                                               generic: generic?.base64EncodedString())
        return try await broker.run(Broker1.AddGenericPassword.self, parameters) { reply throws(SharedDeviceClientError) in
            try KeychainItem(reply.item)
        }
    }

    /// The first item `query` selects, with its secret. Throws `keychain` -25300 when there is none.
    public func findGenericPassword(_ query: ItemQuery) async throws(SharedDeviceClientError) -> KeychainItem {
        try await broker.run(Broker1.FindGenericPassword.self, .init(query, all: nil)) { reply throws(SharedDeviceClientError) in
            try KeychainItem(reply.item)
        }
    }

    /// Every item `query` selects, with their secrets. Throws `keychain` -25300 when there is none, and
    /// `limitExceeded` (`replyBytes`) when they would not fit in one reply.
    public func findAllGenericPasswords(_ query: ItemQuery) async throws(SharedDeviceClientError) -> [KeychainItem] {
        try await broker.run(Broker1.FindGenericPassword.self, .init(query, all: true)) { reply throws(SharedDeviceClientError) in
            var items: [KeychainItem] = []
            for item in reply.items { items.append(try KeychainItem(item)) }
            return items
        }
    }

    /// Gives every item `query` selects a new `secret` and/or the attributes in `changes`; returns how many.
    /// No match throws the keychain's item-not-found (`-25300`, as `SecItemUpdate`).
    @discardableResult
    public func updateGenericPassword(_ query: ItemQuery, secret: Data? = nil, changes: ItemChanges = ItemChanges()) async throws(SharedDeviceClientError) -> Int {
        let parameters = Broker1.UpdateGenericPassword.Parameters(
            service: query.service, account: query.account, label: query.label, type: query.type.map(Int.init), accessGroup: query.accessGroup,
            secret: secret?.base64EncodedString(), setService: changes.service, setAccount: changes.account, setLabel: changes.label,
            setType: changes.type.map(Int.init), setGeneric: changes.generic?.base64EncodedString())
        return try await broker.run(Broker1.UpdateGenericPassword.self, parameters) { reply throws(SharedDeviceClientError) in reply.updated }
    }

    /// Deletes every item `query` selects; returns how many. No match throws the keychain's item-not-found
    /// (`-25300`, as `SecItemDelete`; `error.isItemNotFound`). An app for which "nothing to delete" is fine
    /// calls `deleteGenericPasswordIfPresent` instead.
    @discardableResult
    public func deleteGenericPassword(_ query: ItemQuery) async throws(SharedDeviceClientError) -> Int {
        let parameters = Broker1.DeleteGenericPassword.Parameters(service: query.service, account: query.account, label: query.label,
                                                                  type: query.type.map(Int.init), accessGroup: query.accessGroup)
        return try await broker.run(Broker1.DeleteGenericPassword.self, parameters) { reply throws(SharedDeviceClientError) in reply.deleted }
    }

    /// Deletes every item `query` selects, if there is any; returns how many, 0 when nothing matched. The
    /// broker still answers a delete without a match with item-not-found (-25300, as `SecItemDelete`): this
    /// call takes that answer for 0 and throws every other failure (-34018 for a group the app lacks, …).
    @discardableResult
    public func deleteGenericPasswordIfPresent(_ query: ItemQuery) async throws(SharedDeviceClientError) -> Int {
        do throws(SharedDeviceClientError) {
            return try await deleteGenericPassword(query)
        } catch {
            guard error.isItemNotFound else { throw error }
            return 0
        }
    }

    /// The attributes (never the secrets) of every item `query` selects.
    public func listGenericPasswords(_ query: ItemQuery = ItemQuery()) async throws(SharedDeviceClientError) -> [KeychainItem] {
        let parameters = Broker1.ListGenericPasswords.Parameters(service: query.service, account: query.account, label: query.label,
                                                                 type: query.type.map(Int.init), accessGroup: query.accessGroup)
        return try await broker.run(Broker1.ListGenericPasswords.self, parameters) { reply throws(SharedDeviceClientError) in
            var items: [KeychainItem] = []
            for item in reply.items { items.append(try KeychainItem(item)) }
            return items
        }
    }
}

extension Broker1.FindGenericPassword.Parameters {
    init(_ query: ItemQuery, all: Bool?) {
        self.init(service: query.service, account: query.account, label: query.label, type: query.type.map(Int.init),
                  accessGroup: query.accessGroup, all: all)
    }
}

/// The switch's sign-out, kept from its first reply to its last (replies are handled one after another).
private final class SignedOutBox: @unchecked Sendable {
    var value: SignOutResult?
}
