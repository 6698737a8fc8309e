public import BrokerContract
import Foundation
import IdentityClient
import SharedDevice
public import Varlink

// `SwitchWorker`: the shift change through the broker (`devicectl switch`).
extension Broker {
    /// Signs the current worker out of every app (committed, then the `signedOut` reply), then the next
    /// worker in by device code or browser (`verification` or `authorizationUrl` replies), then `result`.
    /// All three audit events share the result's correlation id. A failed sign-in, or a caller that goes
    /// away, leaves the device signed out; the error says so.
    /// It holds one of the app's sign-in slots while it runs.
    public func switchWorker(
        _ parameters: Broker1.SwitchWorker.Parameters,
        context caller: BrokerCaller,
        replies: VarlinkReplyStream<Broker1.SwitchWorker.Reply>
    ) async throws(BrokerFailure) {
        try await inSignInSlot(caller) { () async throws(BrokerFailure) in
            try await switchWorkerInSlot(parameters, caller: caller, replies: replies)
        }
    }

    private func switchWorkerInSlot(
        _ parameters: Broker1.SwitchWorker.Parameters,
        caller: BrokerCaller,
        replies: VarlinkReplyStream<Broker1.SwitchWorker.Reply>
    ) async throws(BrokerFailure) {
        let reason = try ParameterCheck.reason(parameters.reason, default: .shiftEnd, allowed: [.shiftEnd, .user])
        let application: ApplicationEngine
        var interactive: InteractiveTokenParameters
        let (sessions, shown) = AsyncStream.makeStream(of: DeviceCodeSession.self)
        let reportSignOut: @Sendable (AccountManager.SignOutOutcome?) async -> Void = { signedOut in
            await replies.next(
                Broker1.SwitchWorker.Reply(
                    signedOut: Broker1.SignedOutWorker(
                        account: signedOut?.account.map(Broker1.Account.init),
                        itemsRemoved: signedOut?.itemsRemoved ?? 0
                    )
                )
            )
        }
        switch parameters.flow ?? .deviceCode {
        case .deviceCode:
            application = try self.application(for: caller)
            interactive = InteractiveTokenParameters(
                scopes: parameters.scopes,
                flow: .deviceCode(showCode: { shown.yield($0) }),
                loginHint: parameters.loginHint
            )
        case .browser:
            let redirectURI = try ParameterCheck.redirectURI(parameters.redirectUri)
            let prompt = try ParameterCheck.prompt(parameters.prompt)
            application = try browserApplication(for: caller, redirectURI: redirectURI)
            let flow = Self.browserFlow { url in
                await replies.next(Broker1.SwitchWorker.Reply(authorizationUrl: url.absoluteString))
            }
            interactive = InteractiveTokenParameters(
                scopes: parameters.scopes,
                flow: flow,
                prompt: prompt,
                loginHint: parameters.loginHint
            )
            interactive.browserTimeout = try ParameterCheck.browserTimeout(parameters.timeout)
        case .password:
            application = try self.application(for: caller)
            let credentials = try ParameterCheck.credentials(
                username: parameters.loginHint ?? "",
                password: parameters.password ?? ""
            )
            interactive = InteractiveTokenParameters(
                scopes: parameters.scopes,
                flow: .password(username: credentials.username, password: credentials.password)
            )
            shown.finish()
            let result = try await withPasswordThrottle(caller, username: credentials.username, method: "SwitchWorker")
            { () async throws(SharedDeviceError) in
                try await application.switchWorker(interactive, reason: reason, signedOut: reportSignOut)
            }
            await replies.last(Broker1.SwitchWorker.Reply(result: Broker1.AuthenticationResult(result)))
            return
        case .unknown:
            throw .invalidParameter("flow")
        }
        async let outcome = Self.switchWorker(
            application,
            interactive,
            reason: reason,
            shown: shown,
            signedOut: reportSignOut
        )
        for await session in sessions {
            await replies.next(Broker1.SwitchWorker.Reply(verification: Broker1.DeviceCodeVerification(session)))
        }
        switch await outcome {
        case .success(let result):
            await replies.last(Broker1.SwitchWorker.Reply(result: Broker1.AuthenticationResult(result)))
        case .failure(let error): throw BrokerFailure(error)
        }
    }

    private static func switchWorker(
        _ application: ApplicationEngine,
        _ parameters: InteractiveTokenParameters,
        reason: SignOutReason,
        shown: AsyncStream<DeviceCodeSession>.Continuation,
        signedOut: @escaping @Sendable (AccountManager.SignOutOutcome?) async -> Void
    ) async -> Result<SharedDevice.AuthenticationResult, SharedDeviceError> {
        defer { shown.finish() }
        do throws(SharedDeviceError) {
            return .success(try await application.switchWorker(parameters, reason: reason, signedOut: signedOut))
        } catch {
            return .failure(error)
        }
    }
}
