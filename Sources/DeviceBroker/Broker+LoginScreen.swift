public import BrokerContract
import SharedDevice
public import Varlink

// The login screen (pam_sharedmode): StartLoginScreenSignIn, SubmitLoginScreenSignIn,
// AwaitLoginScreenDeviceCode, OpenLoginSession, CloseLoginSession. (Placeholder: the implementation lands
// with the login-screen work; until then every call is refused as not implemented.)
extension Broker {
    private static let notYet = BrokerFailure(
        reply: VarlinkReply(
            error: "org.varlink.service.MethodNotImplemented",
            parameters: ["method": .string("login screen")]
        )
    )

    public func startLoginScreenSignIn(
        _ parameters: Broker1.StartLoginScreenSignIn.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure) -> Broker1.StartLoginScreenSignIn.Reply { throw Self.notYet }

    public func submitLoginScreenSignIn(
        _ parameters: Broker1.SubmitLoginScreenSignIn.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure) -> Broker1.SubmitLoginScreenSignIn.Reply { throw Self.notYet }

    public func awaitLoginScreenDeviceCode(
        _ parameters: Broker1.AwaitLoginScreenDeviceCode.Parameters,
        context caller: BrokerCaller,
        replies: VarlinkReplyStream<Broker1.AwaitLoginScreenDeviceCode.Reply>
    ) async throws(BrokerFailure) { throw Self.notYet }

    public func openLoginSession(
        _ parameters: Broker1.OpenLoginSession.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure) -> Broker1.OpenLoginSession.Reply { throw Self.notYet }

    public func closeLoginSession(
        _ parameters: Broker1.CloseLoginSession.Parameters,
        context caller: BrokerCaller
    ) async throws(BrokerFailure) -> Broker1.CloseLoginSession.Reply { throw Self.notYet }
}
