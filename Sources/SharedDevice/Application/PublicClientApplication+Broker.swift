import Foundation
public import IdentityClient
import KeychainStore
public import Logging
import Varlink

// PublicClientApplication through the broker daemon (MSAL with the Authenticator broker): the same API,
// but the store, the refresh tokens and the calls to the authority live in `deviced`; the app is the
// policy's app for its uid.
extension PublicClientApplication {
    /// Creates the app's client the way MSAL picks its broker: through the broker daemon when its socket
    /// answers (`BrokerSocket.resolve()`), else on the device's store in the default state directory.
    /// - Throws: `appNotInPolicy` (the broker knows this process as another app, or as none),
    ///   `brokerUnavailable`, `.store` when there is no broker and the store cannot be opened.
    public convenience init(configuration: PublicClientApplicationConfiguration, socketPath: String = BrokerSocket.resolve(),
                            transport: any HTTPTransport = CurlTransport(), logger: Logger = Logger.current) throws(SharedDeviceError) {
        if BrokerClient.isRunning(at: socketPath) {
            try self.init(configuration: configuration, broker: BrokerClient(socketPath: socketPath), transport: transport, logger: logger)
        } else {
            let store: KeychainStore
            do {
                store = try KeychainStore(directory: StateDirectory.resolve(), logger: logger)
            } catch {
                throw SharedDeviceError(.store, error.message, storeError: error)
            }
            try self.init(configuration: configuration, device: ManagedDevice(store: store, logger: logger), transport: transport, logger: logger)
        }
    }

    /// Account changes on the device committed after this returns (sign-ins, global sign-outs, switches,
    /// mode changes): through the broker, its subscription (live before this returns, or the stream ends
    /// at once when the broker is unreachable); else the store's change signal. Call `currentAccount()`
    /// again on each, as MSAL advises.
    public func accountChanges() -> AsyncStream<AccountChange> {
        guard let broker else { return accountManager!.changes() }
        let (stream, continuation) = AsyncStream.makeStream(of: AccountChange.self)
        // A connection of its own: the subscription holds it for as long as the stream is consumed.
        let subscriber = BrokerClient(socketPath: broker.socketPath)
        let cancelled = CancellationFlag()
        continuation.onTermination = { _ in cancelled.set() }
        let live = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? subscriber.subscribe(onSubscribed: { live.signal() }) { change in
                guard !cancelled.isSet else { return false }
                continuation.yield(change)
                return !cancelled.isSet
            }
            continuation.finish()
            live.signal()
        }
        _ = live.wait(timeout: .now() + 10)
        return stream
    }

    // MARK: - Brokered calls

    static func brokered<T>(_ body: () throws(BrokerClientError) -> T) throws(SharedDeviceError) -> T {
        do {
            return try body()
        } catch {
            throw SharedDeviceError(error)
        }
    }

    static func brokeredDeviceInformation(_ broker: BrokerClient) -> (information: DeviceInformation, error: SharedDeviceError?) {
        do throws(BrokerClientError) {
            return (try broker.deviceInformation(), nil)
        } catch {
            return (.default, SharedDeviceError(error))
        }
    }

    func brokeredAcquireToken(_ parameters: InteractiveTokenParameters, broker: BrokerClient) async throws(SharedDeviceError) -> AuthenticationResult {
        // Interactive calls block for minutes: a connection and a thread of their own.
        let client = BrokerClient(socketPath: broker.socketPath)
        let scopes = parameters.scopes, loginHint = parameters.loginHint, flow = brokerFlow(parameters)
        return try await Self.onOwnThread { () throws(BrokerClientError) in
            switch flow {
            case .deviceCode(let showCode):
                try client.signInWithDeviceCode(scopes: scopes, loginHint: loginHint, showCode: showCode)
            case .browser(let redirectURI, let prompt, let timeout, let openBrowser):
                try client.signInWithBrowser(scopes: scopes, redirectURI: redirectURI, loginHint: loginHint, prompt: prompt,
                                             timeout: timeout, openBrowser: openBrowser)
            }
        }
    }

    func brokeredSwitchWorker(_ parameters: InteractiveTokenParameters, reason: SignOutReason, broker: BrokerClient,
                              signedOut: @escaping @Sendable (AccountManager.SignOutOutcome?) async -> Void) async throws(SharedDeviceError) -> AuthenticationResult {
        let client = BrokerClient(socketPath: broker.socketPath)
        let scopes = parameters.scopes, loginHint = parameters.loginHint, flow = brokerFlow(parameters)
        return try await Self.onOwnThread { () throws(BrokerClientError) in
            try client.switchWorker(scopes: scopes, reason: reason, loginHint: loginHint, signIn: flow) { account, removed in
                let outcome = account.map { AccountManager.SignOutOutcome(account: $0, global: true, itemsRemoved: removed, accessGroups: 0) }
                Self.waiting { await signedOut(outcome) }
            }
        }
    }

    /// The app's interactive flow as the broker client runs it (the browser opened from the client's thread).
    private func brokerFlow(_ parameters: InteractiveTokenParameters) -> BrokerClient.SignInFlow {
        switch parameters.flow {
        case .deviceCode(let showCode, _):
            .deviceCode(showCode: showCode)
        case .browser(let openBrowser):
            .browser(redirectURI: configuration.redirectURI.absoluteString, prompt: parameters.prompt?.rawValue,
                     timeout: Int(parameters.browserTimeout)) { url in Self.waiting { try? await openBrowser(url) } }
        }
    }

    /// Runs a blocking broker call on a thread of its own.
    private static func onOwnThread(_ call: @escaping @Sendable () throws(BrokerClientError) -> AuthenticationResult)
        async throws(SharedDeviceError) -> AuthenticationResult {
        let outcome: Result<AuthenticationResult, BrokerClientError> = await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: Result(catching: call)) }
        }
        do {
            return try outcome.get()
        } catch {
            throw SharedDeviceError(error)
        }
    }

    /// Runs `body` on a task and blocks this (broker client) thread until it is done.
    private static func waiting(_ body: @escaping @Sendable () async -> Void) {
        let done = DispatchSemaphore(value: 0)
        Task {
            await body()
            done.signal()
        }
        done.wait()
    }

    func brokeredSignOut(_ parameters: SignOutParameters) throws(SharedDeviceError) -> AccountManager.SignOutOutcome {
        guard let broker else { preconditionFailure("brokeredSignOut without a broker") }
        let outcome = try Self.brokered { () throws(BrokerClientError) in try broker.signOut(reason: parameters.reason) }
        return AccountManager.SignOutOutcome(account: outcome.account, global: outcome.global, itemsRemoved: outcome.itemsRemoved, accessGroups: 0)
    }
}

extension SharedDeviceError {
    /// The in-process error a broker refusal stands for.
    public init(_ error: BrokerClientError) {
        switch error {
        case .keychain(let error): self.init(.store, error.message, storeError: error)
        case .device(let error): self = error
        case .callerNotInPolicy(_, let message): self.init(.appNotInPolicy, message)
        case .unavailable(let message), .untrustedBroker(let message): self.init(.brokerUnavailable, message)
        case .refused(_, let message): self.init(.brokerUnavailable, message)
        }
    }
}

/// A flag set once from any thread.
private final class CancellationFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
