import BrokerContract
import BrokerServer
import DeviceBroker
import Foundation
import IdentityTestSupport
import Logging
import PamTestSupport
import ProcessTestSupport
import SharedDevice
import StoreTestSupport
import TestTags
import Testing
import Varlink
import VarlinkServer

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

    /// The tenant's answers to a sign-in whose first code is wrong: the code sent, a refusal, then the tokens.
    static func scriptAWrongCodeThenTheRightOne(_ kiosk: Native.Kiosk) async throws {
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
    }

    @Test func nativeAuthIsTheFirstChoiceAndAWrongCodeLeavesTheSignInOpen() async throws {
        let kiosk = try Self.kiosk()
        try await Self.scriptAWrongCodeThenTheRightOne(kiosk)
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

    /// The same sign-in through the PAM module as a login screen runs it (pamtester; the module and its
    /// helper as built), against this kiosk's broker served on a socket as deviced serves it: the code's
    /// prompt comes after the name with where the code went, a wrong code is asked again, the right one
    /// signs the worker in as the session's user.
    @Test(.tags(.needsRoot)) func theModuleAsksForTheCodeAgainAfterAWrongOneAndTheRightOneSignsIn() async throws {
        try await PamStack.build()
        let kiosk = try Self.kiosk()
        try await Self.scriptAWrongCodeThenTheRightOne(kiosk)
        let directory = TemporaryStateDirectory("pam-native")
        let socket = directory.url.appendingPathComponent("broker.sock").path
        let stack = try PamStack(arguments: [], socket: socket)
        defer { stack.remove() }
        // The helper checks the broker's uid (root: this test's) as it checks deviced's.
        let (running, started) = AsyncStream<Void>.makeStream()
        let server = VarlinkServer(
            listener: .path(socket),
            configuration: .broker(kiosk.broker),
            info: .broker,
            handler: BrokerMethodHandler(broker: kiosk.broker),
            onServerRunning: { started.yield() },
            logger: .init(label: "pam-native", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        let result = try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { started.finish() }
                try await server.run()
            }
            var iterator = running.makeAsyncIterator()
            try #require(await iterator.next() != nil, "the server ended before it served")
            defer { server.shutdown() }
            let result = try await stack.pamtester("ana@contoso.com", stdin: "11111111\n22222222\n")
            server.shutdown()
            try await group.waitForAll()
            return result
        }
        let output = result.stdout + result.stderr
        #expect(result.status == 0, "\(output)")
        #expect(output.contains("successfully authenticated"), "\(output)")
        #expect(output.contains("A code was sent to a***@co**o.com. Type it at the next prompt."), "\(output)")
        #expect(output.components(separatedBy: "One-time code: ").count == 3, "not asked twice: \(output)")
        #expect(output.contains("Wrong code. Try again."), "\(output)")
        #expect(!output.contains("Password: "), "a password was asked: \(output)")
        let codes = kiosk.transport.requests(to: Native.tokenPath).map { $0.form["oob"] ?? "" }
        #expect(codes == ["11111111", "22222222"], "\(codes)")
        let event = try #require(try kiosk.fixture.device.auditEvents().last { $0.type == .accountSignedIn })
        #expect(event.account == "ana@contoso.com" && event.details["flow"] == "nativeAuth", "\(event)")
        #expect(event.details["via"] == "login-screen" && event.details["service"] == stack.service, "\(event)")
        #expect(!"\(try kiosk.fixture.device.auditEvents())".contains("22222222"))
    }
}
