import BrokerContract

/// pam_sm_authenticate's half: the worker's sign-in through deviced with the flow the broker picks (or
/// the module's `flow=`), the prompts relayed through the module. The password and the one-time code
/// are held in byte arrays wiped after the call (the varlink call's own copies are the codec's).
struct LoginScreenSignIn {
    let arguments: HelperArguments
    let channel: ModuleChannel

    /// How many one-time codes the worker may type before the module gives up.
    static let codeAttempts = 3

    /// Signs the worker in; tells the module the session's user, the worker and the correlation id.
    func run() throws(PamFailure) {
        guard let username = arguments.user, !username.isEmpty else {
            throw PamFailure(.userUnknown, nil)
        }
        let broker = try BrokerLink(socket: arguments.socket, unavailable: .authInfoUnavailable)
        let next = try broker.call(
            Broker1.StartLoginScreenSignIn.self,
            .init(username: username, loginScreen: arguments.loginScreen, flow: arguments.flow, app: arguments.app)
        ).next
        let signIn: Broker1.LoginScreenSignIn
        switch next.challenge {
        case .password:
            signIn = try submit(broker, next.signInId, prompt: "Password: ", asCode: false)
        case .code:
            let address = next.sentTo.map { " to \($0)" } ?? ""
            channel.info("A code was sent\(address). Type it at the next prompt.")
            signIn = try submitCode(broker, next)
        case .deviceCode:
            signIn = try awaitDeviceCode(broker, next.signInId)
        case .unknown(let kind):
            throw PamFailure(
                .authInfoUnavailable,
                "The sign-in service asks for \(kind), which this login screen cannot."
            )
        }
        if let replaced = signIn.signedOut?.account?.username {
            channel.info("\(replaced) was signed out.")
        }
        channel.set("user", signIn.sessionUser)
        channel.set("worker", signIn.account.username ?? signIn.account.homeAccountId)
        channel.set("correlation", signIn.correlationId)
    }

    /// Asks for the password (or a code) and submits it.
    private func submit(
        _ broker: BrokerLink,
        _ signInId: String,
        prompt: String,
        asCode: Bool
    ) throws(PamFailure)
        -> Broker1.LoginScreenSignIn
    {
        guard var answer = channel.ask(prompt, echo: false) else {
            throw PamFailure(.conversationError, nil)
        }
        defer { ModuleChannel.wipe(&answer) }
        let secret = String(decoding: answer, as: UTF8.self)
        let parameters =
            asCode
            ? Broker1.SubmitLoginScreenSignIn.Parameters(signInId: signInId, code: secret)
            : Broker1.SubmitLoginScreenSignIn.Parameters(signInId: signInId, password: secret)
        return try broker.call(Broker1.SubmitLoginScreenSignIn.self, parameters).signIn
    }

    /// The one-time code, asked again after a wrong one (the sign-in stays open), a few times at most.
    private func submitCode(
        _ broker: BrokerLink,
        _ next: Broker1.LoginChallenge
    ) throws(PamFailure)
        -> Broker1.LoginScreenSignIn
    {
        var attempt = 1
        while true {
            do {
                return try submit(broker, next.signInId, prompt: "One-time code: ", asCode: true)
            } catch {
                guard error.code == .authError, error.message == "Wrong code.", attempt < Self.codeAttempts else {
                    throw error
                }
                channel.error("Wrong code. Try again.")
                attempt += 1
            }
        }
    }

    /// Shows the device code's verification and waits for the worker to finish on another device.
    private func awaitDeviceCode(
        _ broker: BrokerLink,
        _ signInId: String
    ) throws(PamFailure)
        -> Broker1.LoginScreenSignIn
    {
        try broker.stream(Broker1.AwaitLoginScreenDeviceCode.self, .init(signInId: signInId))
        while true {
            let (reply, continues) = try broker.next(Broker1.AwaitLoginScreenDeviceCode.self)
            if let verification = reply.verification {
                // devicectl's words, whatever the authority's own message says: the worker reads it at the
                // login screen and types the code on another device.
                channel.info(
                    "To sign in, open \(verification.verificationUri) and enter the code \(verification.userCode)"
                )
            }
            if let signIn = reply.signIn { return signIn }
            if !continues {
                throw PamFailure(
                    .authInfoUnavailable,
                    "The sign-in service ended the device-code sign-in without a result."
                )
            }
        }
    }
}
