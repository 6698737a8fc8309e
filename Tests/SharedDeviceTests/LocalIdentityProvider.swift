import Foundation
import IdentityClient
import Synchronization
import Testing

/// The real OpenID Connect provider the integration tests sign in against: Debian's glewlwyd on
/// loopback, started (once per port, idempotently) by `tools/idp`, with workers `worker1` and `worker2`.
struct LocalIdentityProvider: Sendable {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let script = packageRoot.appendingPathComponent("tools/idp").path
    /// The port this target's provider listens on (the demo uses 4593, the CLI tests 4599).
    static let testPort = 4597

    let port: Int
    /// `http://127.0.0.1:PORT/api/oidc` (RS256 ID tokens).
    let issuer: String
    /// The ES256 plugin's issuer.
    let issuerES256: String
    let clientID: String
    /// Where glewlwyd keeps its database and keys (`rsa-private.pem`).
    let directory: URL

    /// The tests' shared provider, started on first use on a thread of its own: `tools/idp start` takes seconds
    /// on a slow disk, and tests waiting for it must not hold the few threads every async test shares.
    private static let sharedStart = Task { await startResult(port: testPort) }

    /// `start(port:)` on a thread of its own, for async tests.
    static func started(port: Int) async throws(ProviderError) -> LocalIdentityProvider {
        try await startResult(port: port).get()
    }

    private static func startResult(port: Int) async -> Result<LocalIdentityProvider, ProviderError> {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: Result { () throws(ProviderError) in try start(port: port) })
            }
        }
    }

    struct ProviderError: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs `tools/idp start --port PORT` and reads the lines it prints.
    static func start(port: Int) throws(ProviderError) -> LocalIdentityProvider {
        let result = run(["start", "--port", String(port)])
        guard result.status == 0 else {
            throw ProviderError(description: "tools/idp start failed (\(result.status)): \(result.stderr)")
        }
        var values: [String: String] = [:]
        for line in result.stdout.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        guard let issuer = values["ISSUER"], let es256 = values["ISSUER_ES256"], let client = values["CLIENT_ID"],
            let dir = values["DIR"]
        else {
            throw ProviderError(description: "tools/idp start printed no ISSUER/CLIENT_ID/DIR: \(result.stdout)")
        }
        return LocalIdentityProvider(
            port: port,
            issuer: issuer,
            issuerES256: es256,
            clientID: client,
            directory: URL(fileURLWithPath: dir)
        )
    }

    static func shared() async throws -> LocalIdentityProvider { try await sharedStart.value.get() }

    /// Approves a pending device code as `user` through the provider's API (the worker typing the code).
    func approve(code: String, user: String, plugin: String = "oidc") throws {
        let result = Self.run(["approve", "--port", String(port), "--code", code, "--user", user, "--plugin", plugin])
        guard result.status == 0 else { throw ProviderError(description: "approve failed: \(result.stderr)") }
    }

    /// Revokes every refresh token `user` holds for the client.
    func revoke(user: String) throws {
        let result = Self.run(["revoke", "--port", String(port), "--user", user])
        guard result.status == 0 else { throw ProviderError(description: "revoke failed: \(result.stderr)") }
    }

    /// Acts as the system browser for the authorization-code flow: signs `user` in and follows the
    /// redirect to the app's loopback listener.
    func browse(_ url: URL, user: String) throws(IdentityError) {
        let result = Self.run(["browse", "--port", String(port), "--user", user, "--", url.absoluteString])
        guard result.status == 0 else {
            throw IdentityError(.userCanceled, "the test browser failed: \(result.stderr)")
        }
    }

    func stop() {
        _ = Self.run(["stop", "--port", String(port)])
    }

    /// The kiosk policy pointed at this provider (`issuer` replaced).
    func kioskPolicy(issuer: String? = nil, file: String = "kiosk.json") throws -> Data {
        try Policies.edited(file) { document in
            var authority = document["authority"] as! [String: Any]
            authority["issuer"] = issuer ?? self.issuer
            document["authority"] = authority
        }
    }

    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func run(_ arguments: [String]) -> Output {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: script)
        process.arguments = arguments
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch {
            return Output(status: -1, stdout: "", stderr: "cannot run tools/idp: \(error)")
        }
        // Standard error is drained on another thread so that neither pipe can fill up and stall the script.
        let errorData = Mutex<Data>(Data())
        let errorRead = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            errorData.withLock { $0 = error.fileHandleForReading.readDataToEndOfFile() }
            errorRead.signal()
        }
        let out = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        errorRead.wait()
        return Output(
            status: process.terminationStatus,
            stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: errorData.withLock { $0 }, as: UTF8.self)
        )
    }
}
