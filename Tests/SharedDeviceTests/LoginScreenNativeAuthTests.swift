import BrokerContract
import DeviceBroker
import Foundation
import IdentityTestSupport
import SharedDevice
import Testing
import Varlink

/// The login screen's sign-in with native authentication (Microsoft Entra External ID), against the
/// stand-in of Microsoft's native authentication API that NativeAuthBrokerTests scripts: the flow the
/// broker picks first when the policy lists it, and the one-time code typed at the prompt.
@Suite struct LoginScreenNativeAuthTests {
    typealias Native = NativeAuthBrokerTests
    static let root = BrokerCaller(uid: 0, gid: 0, pid: 1, connectionID: 1)

    /// The native-auth kiosk with the login screen configured (`session.user` nobody).
    static func kiosk() throws -> Native.Kiosk {
        let kiosk = try Native.Kiosk(flows: ["deviceCode", "password", "nativeAuth"])
        try kiosk.fixture.provision(
            try Policies.edited { document in
                var authority = document["authority"] as! [String: Any]
                authority["issuer"] = "https://contoso.ciamlogin.com/\(Native.tenantID)"
                authority["flows"] = ["deviceCode", "password", "nativeAuth"]
                document["authority"] = authority
                var session = document["session"] as! [String: Any]
                session["user"] = "nobody"
                document["session"] = session
            }
        )
        return kiosk
    }

    @Test func nativeAuthIsTheFirstChoiceAndAWrongCodeLeavesTheSignInOpen() async throws {
        let kiosk = try Self.kiosk()
        kiosk.transport.enqueue(Native.initiatePath, .json(["continuation_token": "ct-1"]))
        kiosk.transport.enqueue(Native.challengePath, .json(Native.codeSent))
        kiosk.transport.enqueue(
            Native.tokenPath,
            Native.error(
                "invalid_grant",
                codes: [50181],
                suberror: "invalid_oob_value",
                "Unable to validate the code."
            ),
            try await kiosk.tokens()
        )
        let next = try await kiosk.broker.startLoginScreenSignIn(
            .init(username: "ana@contoso.com", loginScreen: .init(service: "greetd", seat: "seat0")),
            context: Self.root
        ).next
        #expect(next.challenge == .code && next.codeLength == 8 && next.sentTo == "a***@co**o.com", "\(next)")
        let wrong = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.submitLoginScreenSignIn(
                .init(signInId: next.signInId, code: "11111111"),
                context: Self.root
            )
        }
        #expect(wrong?.accountError?.identityCode == "invalid_code", "\(String(describing: wrong))")
        // A password where the prompt asked for the code is refused before the authority is asked.
        let misplaced = try await refusal { () async throws(BrokerFailure) in
            try await kiosk.broker.submitLoginScreenSignIn(
                .init(signInId: next.signInId, password: "p"),
                context: Self.root
            )
        }
        #expect(misplaced?.reply.error == "org.varlink.service.InvalidParameter")
        let signIn = try await kiosk.broker.submitLoginScreenSignIn(
            .init(signInId: next.signInId, code: "22222222"),
            context: Self.root
        ).signIn
        #expect(signIn.account.username == "ana@contoso.com")
        #expect(signIn.sessionUser == "nobody")
        let event = try #require(try kiosk.fixture.device.auditEvents().last { $0.type == .accountSignedIn })
        #expect(event.details["flow"] == "nativeAuth")
        #expect(event.details["via"] == "login-screen")
        #expect(event.details["service"] == "greetd")
        #expect(!"\(event)".contains("22222222"))
    }
}
