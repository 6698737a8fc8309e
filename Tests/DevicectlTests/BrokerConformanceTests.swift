import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// Every method of org.sharedmode.Broker1, and every error an app can meet, driven through the generated
/// contract by a Swift app (`broker-conformance`, linking only the client) under the app's uid, against the
/// real daemon with the local identity provider as its authority. ProtocolError comes twice: the client's
/// own refusal of a request over the broker's limit, and the broker's when the generated call is sent
/// anyway. (The other raw-frame errors — InvalidParameter, MethodNotFound, ExpectedMore — need bytes the
/// generated contract never encodes: the PyPI client's tests send them.)
@Suite(.serialized, .tags(.integration, .needsRoot, .needsIdentityProvider)) struct BrokerConformanceTests {
    typealias Daemon = BrokerDaemon
    typealias Provider = IdentityCLITests.Provider

    @Test func everyMethodAndAppErrorThroughTheGeneratedContract() async throws {
        let daemon = try await BrokerSignInTests.daemon()
        let lock = try await IdentityCLITests.ProviderLock.acquire(timeout: 120)
        let app = try daemon.start(product: "broker-conformance", as: Daemon.scannerUID, ["app"])
        defer { _ = app.killIfRunning() }
        let shown = await app.waitForLine(timeout: 60) { $0.hasPrefix("code ") }
        guard let code = shown?.split(separator: " ").last.map(String.init) else {
            lock.release()
            Issue.record("no device code shown: \(app.lines) \(app.standardError)")
            await daemon.cleanUp()
            return
        }
        let approval = try await Provider.tool([
            "approve", "--port", "\(IdentityCLITests.port)", "--code", code, "--user", "worker1",
        ])
        #expect(approval.status == 0, "\(approval.stderr)")
        // The run requests more codes (the switch, the pending sign-ins): still under the lock.
        let finished = await app.waitForExit(timeout: 120)
        lock.release()
        try #require(
            finished,
            "the conformance run did not finish: \(app.lines) \(app.standardError); the daemon's log ends: \(daemon.logTail())"
        )
        #expect(app.status == 0, "\(app.standardError)")
        let lines = app.lines.filter { !$0.hasPrefix("code ") }
        let expected = [
            "GetCaller ok \(Daemon.scanner) administrator false",
            "ActForCaller error AccountError actForCallerRefused",
            "GetStatus error org.varlink.service.PermissionDenied",
            "GetDeviceInformation ok shared",
            "GetCurrentAccount ok none",
            "ReportActivity ok idle",
            "AcquireTokenSilent error AccountError noCurrentAccount",
            "AddGenericPassword ok conformance",
            "AddGenericPassword error KeychainError -25299",
            "FindGenericPassword ok secret",
            "UpdateGenericPassword ok 1",
            "ListGenericPasswords ok updated",
            "DeleteGenericPassword ok 1",
            "FindGenericPassword error KeychainError -25300",
            "AddGenericPassword error org.sharedmode.Broker1.ProtocolError",
            "ProtocolError ok names-limit",
            "FindGenericPassword error LimitExceeded replyBytes",
            "SignOut error org.varlink.service.PermissionDenied",
            "SubscribeAccountChanges ok subscribed",
            "SignInWithPassword error AccountError flowNotAllowed",
            "StartNativeSignIn error AccountError flowNotAllowed",
            "ResendNativeSignInCode error AccountError signInNotFound",
            "SubmitNativeSignIn error AccountError signInNotFound",
            "SignInWithBrowser ok authorizationUrl",
            "SignInWithDeviceCode ok interactive worker1",
            "AcquireTokenSilent ok cache",
            "GetAccounts ok worker1",
            "AcquireTokenSilent error AccountError authorityNotAllowed",
            "SwitchWorker ok signedOut worker1 then verification",
            "GetCurrentAccount ok none",
            "GetAccounts ok 0",
            "SignOut error AccountError noCurrentAccount",
            "SignInWithDeviceCode error LimitExceeded pendingSignInsPerApp",
            // The app's cap is 16: the subscription and the client's pooled connection are two of them, so
            // the 15th connection opened here is refused.
            "connections 15 error TooManyConnections user",
            "events subscribed,signedIn,signedOut",
        ]
        #expect(lines == expected, "\(zip(lines, expected).filter { $0 != $1 }) of \(lines)")
        // The same run, as a uid the policy does not list.
        let stranger = try daemon.start(product: "broker-conformance", as: Daemon.strangerUID, ["stranger"])
        try #require(await stranger.waitForExit(timeout: 30))
        #expect(
            stranger.lines == ["GetCurrentAccount error CallerNotInPolicy"],
            "\(stranger.lines) \(stranger.standardError)"
        )
        await daemon.cleanUp()
    }
}
