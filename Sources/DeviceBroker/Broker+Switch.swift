import Foundation
import IdentityClient
import SharedDevice
import Varlink

// `SwitchWorker`: the shift change through the broker (`devicectl switch`).
extension Broker {
    /// Signs the current worker out of every app (committed, then the `signedOut` reply), then the next
    /// worker in by device code or browser (`verification` or `authorizationUrl` replies), then `result`.
    /// All three audit events share the result's correlation id. A failed sign-in, or a caller that goes
    /// away, leaves the device signed out; the error says so.
    func switchWorker(_ parameters: BrokerParameters, caller: BrokerCaller,
                      reply: @escaping @Sendable (VarlinkReply) async -> Bool) async throws(BrokerFailure) {
        let scopes = try parameters.strings("scopes")
        let reasonName = try parameters.optionalString("reason") ?? SignOutReason.shiftEnd.rawValue
        guard let reason = SignOutReason(rawValue: reasonName), reason == .shiftEnd || reason == .user else { throw .invalidParameter("reason") }
        let loginHint = try parameters.optionalString("loginHint")
        let application: PublicClientApplication
        var interactive: InteractiveTokenParameters
        let (sessions, shown) = AsyncStream.makeStream(of: DeviceCodeSession.self)
        switch try parameters.optionalString("flow") ?? "deviceCode" {
        case "deviceCode":
            application = try self.application(for: caller)
            interactive = InteractiveTokenParameters(scopes: scopes, flow: .deviceCode(showCode: { shown.yield($0) }), loginHint: loginHint)
        case "browser":
            guard let redirectURI = URL(string: try parameters.string("redirectUri")) else { throw .invalidParameter("redirectUri") }
            let prompt = try parameters.optionalString("prompt").map { name throws(BrokerFailure) -> Prompt in
                guard let prompt = Prompt(rawValue: name) else { throw .invalidParameter("prompt") }
                return prompt
            }
            application = try browserApplication(for: caller, redirectURI: redirectURI)
            interactive = InteractiveTokenParameters(scopes: scopes, flow: Self.browserFlow(reply: reply), prompt: prompt, loginHint: loginHint)
            interactive.browserTimeout = TimeInterval(try parameters.optionalInt("timeout", in: 1...3600) ?? 300)
        default:
            throw .invalidParameter("flow")
        }
        async let outcome = Self.switchWorker(application, interactive, reason: reason, shown: shown) { signedOut in
            _ = await reply(VarlinkReply(parameters: ["signedOut": .object([
                "account": .account(signedOut?.account), "itemsRemoved": .int(Int64(signedOut?.itemsRemoved ?? 0)),
            ])], continues: true))
        }
        for await session in sessions {
            _ = await reply(Self.verificationReply(session))
        }
        switch await outcome {
        case .success(let result): _ = await reply(VarlinkReply(parameters: ["result": .result(result)]))
        case .failure(let error): throw BrokerFailure(error)
        }
    }

    private static func switchWorker(_ application: PublicClientApplication, _ parameters: InteractiveTokenParameters, reason: SignOutReason,
                                     shown: AsyncStream<DeviceCodeSession>.Continuation,
                                     signedOut: @escaping @Sendable (AccountManager.SignOutOutcome?) async -> Void) async -> Result<AuthenticationResult, SharedDeviceError> {
        defer { shown.finish() }
        do throws(SharedDeviceError) {
            return .success(try await application.switchWorker(parameters, reason: reason, signedOut: signedOut))
        } catch {
            return .failure(error)
        }
    }
}
