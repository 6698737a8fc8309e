// An app on a provisioned kiosk that signs in against the local identity provider.
import BenchmarkFixtures
import Foundation
import IdentityClient
import KeychainStore
import SharedDevice

/// The scanner app of policies/kiosk.json on a fresh device (synchronous NORMAL) whose authority is the local
/// identity provider: `TOKEN_BENCHMARK_ISSUER` (default http://127.0.0.1:4596/api/oidc, where `tools/bench tokens`
/// starts glewlwyd). The test browser is `tools/idp browse` (`TOKEN_BENCHMARK_IDP`, default ../tools/idp seen
/// from the Benchmarks package, the working directory of a benchmark run).
final class TokenFixture {
    static let scopes = ["User.Read"]

    let app: ApplicationEngine
    private let scratch: ScratchDirectory
    private let idp: String

    init() throws {
        let environment = ProcessInfo.processInfo.environment
        let issuer = environment["TOKEN_BENCHMARK_ISSUER"] ?? "http://127.0.0.1:4596/api/oidc"
        idp = environment["TOKEN_BENCHMARK_IDP"] ?? "../tools/idp"
        let policyPath = environment["TOKEN_BENCHMARK_POLICY"] ?? "../policies/kiosk.json"

        scratch = try ScratchDirectory("token-benchmarks")
        let store = try KeychainStore(directory: scratch.url, options: StoreOptions(synchronous: .normal))
        let device = ManagedDevice(store: store)
        guard
            var policy = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: policyPath)))
                as? [String: Any],
            var authority = policy["authority"] as? [String: Any]
        else { throw BenchmarkFailure("\(policyPath) is not a policy with an authority") }
        authority["issuer"] = issuer
        policy["authority"] = authority
        _ = try device.provision(
            policyDocument: try JSONSerialization.data(withJSONObject: policy),
            actor: "token-benchmarks"
        )
        guard let provisioned = try device.policy() else {
            throw BenchmarkFailure("the device has no policy after provisioning")
        }
        app = try ApplicationEngine(
            configuration: ApplicationEngineConfiguration(appID: "com.contoso.kiosk.scanner", policy: provisioned),
            device: device
        )
    }

    /// A whole browser sign-in of worker1: discovery (cached after the first), auth code + PKCE on loopback,
    /// the token request, ID-token validation and the cache write.
    @discardableResult
    func signIn() async throws -> AuthenticationResult {
        try await app.acquireToken(
            InteractiveTokenParameters(
                scopes: Self.scopes,
                flow: .browser(openBrowser: browser(user: "worker1")),
                browserTimeout: 60
            )
        )
    }

    /// The test browser: `tools/idp browse` signs `user` in and follows the redirect to the app's listener.
    private func browser(user: String) -> @Sendable (URL) async throws(IdentityError) -> Void {
        let idp = idp
        return { (url: URL) async throws(IdentityError) in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: idp)
            process.arguments = ["browse", "--user", user, "--", url.absoluteString]
            // Without package-benchmark's malloc interposer, which LD_PRELOAD would hand down to the browser's Python.
            process.environment = ProcessInfo.processInfo.environment.filter { $0.key != "LD_PRELOAD" }
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            do { try process.run() } catch { throw IdentityError(.userCanceled, "cannot run \(idp)") }
        }
    }

    /// Removes the files.
    func remove() { scratch.remove() }
}
