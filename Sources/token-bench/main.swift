// Benchmark of the token calls an app makes, against the local identity provider (tools/bench-tokens
// starts it): silent token from the cache, forced refresh over loopback HTTP, a whole browser sign-in
// (authorization code + PKCE + ID-token validation), and ID-token validation alone. Prints figures;
// asserts nothing.
//
// Usage: token-bench ISSUER IDP_SCRIPT   (IDP_SCRIPT: the path of tools/idp, used as the test browser)

import Foundation
import IdentityClient
import KeychainStore
import SharedDevice

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
}

func format(_ value: Double) -> String { String(format: "%.1f", value) }

func elapsed(_ start: ContinuousClock.Instant) -> Double {
    let duration = ContinuousClock.now - start
    return Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: token-bench ISSUER IDP_SCRIPT\n".utf8))
    exit(64)
}
let issuer = arguments[1], idp = arguments[2]

/// The test browser: `tools/idp browse` signs `user` in and follows the redirect to our listener.
func browser(user: String) -> @Sendable (URL) async throws(IdentityError) -> Void {
    { (url: URL) async throws(IdentityError) in
        let process = Process()
        process.executableURL = URL(fileURLWithPath: idp)
        process.arguments = ["browse", "--user", user, "--", url.absoluteString]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { throw IdentityError(.userCanceled, "cannot run \(idp)") }
    }
}

let directory = FileManager.default.temporaryDirectory.appendingPathComponent("token-bench-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: directory) }
let store = try KeychainStore(directory: directory, options: StoreOptions(synchronous: .normal))
let device = ManagedDevice(store: store)
var policy = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "policies/kiosk.json"))) as! [String: Any]
var authority = policy["authority"] as! [String: Any]
authority["issuer"] = issuer
policy["authority"] = authority
_ = try device.provision(policyDocument: try JSONSerialization.data(withJSONObject: policy), actor: "token-bench")
let configuration = PublicClientApplicationConfiguration(appID: "com.contoso.kiosk.scanner", policy: try device.policy()!)
let scanner = try PublicClientApplication(configuration: configuration, device: device)

print("token-bench: PublicClientApplication against \(issuer) (release build, synchronous NORMAL)")

// A whole browser sign-in, five times (signed out in between).
var signIns: [Double] = []
for _ in 0..<5 {
    let start = ContinuousClock.now
    _ = try await scanner.acquireToken(InteractiveTokenParameters(scopes: ["User.Read"], flow: .browser(openBrowser: browser(user: "worker1")),
                                                                  browserTimeout: 60))
    signIns.append(elapsed(start))
    try await scanner.signOut()
}
print("browser sign-in (discovery cached, auth code + PKCE, token, ID-token validation, cache write), 5 rounds: "
      + "p50 \(format(percentile(signIns, 0.5) / 1000)) ms, max \(format(percentile(signIns, 1) / 1000)) ms")

let signedIn = try await scanner.acquireToken(InteractiveTokenParameters(scopes: ["User.Read"], flow: .browser(openBrowser: browser(user: "worker1")),
                                                                         browserTimeout: 60))

// Silent from the cache.
var silent: [Double] = []
for _ in 0..<2000 {
    let start = ContinuousClock.now
    _ = try await scanner.acquireTokenSilent(scopes: ["User.Read"])
    silent.append(elapsed(start))
}
print("acquireTokenSilent from the cache, 2000 calls: p50 \(format(percentile(silent, 0.5))) µs, p99 \(format(percentile(silent, 0.99))) µs")

// Forced refresh: a refresh-token grant over loopback HTTP plus the cache write.
var refreshes: [Double] = []
for _ in 0..<50 {
    let start = ContinuousClock.now
    _ = try await scanner.acquireTokenSilent(scopes: ["User.Read"], forceRefresh: true)
    refreshes.append(elapsed(start))
}
print("acquireTokenSilent(forceRefresh:), 50 calls: p50 \(format(percentile(refreshes, 0.5) / 1000)) ms, p99 \(format(percentile(refreshes, 0.99) / 1000)) ms")

// ID-token validation alone (keys cached): signature, issuer, audience, expiry, nonce.
let idToken = signedIn.idToken!
var validations: [Double] = []
let nonce = try JSONSerialization.jsonObject(with: Base64URL.decode(idToken.split(separator: ".")[1])!) as! [String: Any]
for _ in 0..<1000 {
    let start = ContinuousClock.now
    _ = try await scanner.identity.validateIDToken(idToken, nonce: nonce["nonce"] as? String)
    validations.append(elapsed(start))
}
print("ID-token validation (RS256, keys cached), 1000 calls: p50 \(format(percentile(validations, 0.5))) µs, p99 \(format(percentile(validations, 0.99))) µs")
try await scanner.signOut()
