import Foundation
import IdentityClient
import InMemoryLogging
import KeychainStore
import Logging
import SharedDevice
import Synchronization
import Testing

/// A transport that passes every request to the real one and keeps the secrets that cross it: the
/// device code and user code, every access, refresh and ID token the provider issued.
private final class SecretRecordingTransport: HTTPTransport {
    private let upstream = URLSessionTransport()
    private let recorded = Mutex<[String: Set<String>]>([:])

    /// The secrets seen, by response field name (`device_code`, `user_code`, `access_token`, …).
    var secrets: [String: Set<String>] { recorded.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws(IdentityError) -> HTTPResponse {
        let response = try await upstream.send(request)
        if let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] {
            recorded.withLock { recorded in
                for field in ["device_code", "user_code", "access_token", "refresh_token", "id_token"] {
                    if let value = object[field] as? String, !value.isEmpty { recorded[field, default: []].insert(value) }
                }
            }
        }
        return response
    }
}

/// Every text of a log entry: its message, all metadata values (nested ones rendered recursively) and
/// its error, however it prints.
private func texts(of entry: InMemoryLogHandler.Entry) -> [String] {
    func render(_ value: Logger.MetadataValue) -> [String] {
        switch value {
        case .string(let text): [text]
        case .stringConvertible(let value): [value.description]
        case .array(let values): values.flatMap(render)
        case .dictionary(let values): values.flatMap { [$0.key] + render($0.value) }
        }
    }
    var result = [entry.message.description]
    for (key, value) in entry.metadata { result += [key] + render(value) }
    if let error = entry.error { result += [String(describing: error), String(reflecting: error)] }
    return result
}

extension PublicClientApplicationTests {
    /// A whole shift against the real provider with every layer logging to one in-memory handler at
    /// `.trace`: the logs tell what happened at debug and trace level, and never carry a secret.
    ///
    /// Nested in `PublicClientApplicationTests`, whose `.serialized` trait keeps it from running beside
    /// that suite's sign-ins against the same glewlwyd (which fails concurrent sign-ins now and then).
    @Suite struct LogSecrecyTests {
        @Test func aShiftLogsEveryStepAtDebugAndTraceButNoTokenCodeKeyOrPassphrase() async throws {
            var handler = InMemoryLogHandler()
            handler.logLevel = .trace
            let logger = Logger(label: "log-secrecy", factory: { [handler] _ in handler })
            let provider = try LocalIdentityProvider.shared()

            // The device: a key-file store, the device and the app all log to `logger`.
            let directory = TemporaryStateDirectory("log-secrecy")
            let store = try KeychainStore(directory: directory.url, options: StoreOptions(synchronous: .normal), logger: logger)
            let device = ManagedDevice(store: store, logger: logger)
            try device.provision(policyDocument: try provider.kioskPolicy(), actor: DeviceFixture.admin)
            let transport = SecretRecordingTransport()
            let policy = try #require(try device.policy())
            let scanner = try PublicClientApplication(
                configuration: PublicClientApplicationConfiguration(appID: ProviderKiosk.scanner, policy: policy),
                device: device, transport: transport, logger: logger)

            // 1. Device-code sign-in, approved by the worker as soon as the code shows.
            let shownCode = Mutex<String?>(nil)
            let signedIn = try await scanner.acquireToken(InteractiveTokenParameters(scopes: ["User.Read"], flow: .deviceCode(showCode: { session in
                shownCode.withLock { $0 = session.userCode }
                Thread.detachNewThread { try? provider.approve(code: session.userCode, user: "worker1") }
            })))
            let signInEntries = handler.entries

            // 2. A silent token with a forced refresh, and the userinfo call with `Authorization: Bearer`.
            let refreshed = try await scanner.acquireTokenSilent(scopes: ["User.Read"], forceRefresh: true)
            #expect(refreshed.source == .refresh)
            let userinfo = try await scanner.identity.get(try await scanner.identity.userInfoEndpoint(), accessToken: refreshed.accessToken)
            #expect(userinfo.status == 200)
            let refreshEntries = Array(handler.entries.dropFirst(signInEntries.count))

            // The cache as MSAL would export it: its secrets are the app's refresh, access and ID tokens.
            let export = try TokenCache().exportJSON(as: scanner.app, in: store)
            let cache = try #require(try JSONSerialization.jsonObject(with: export) as? [String: Any])

            // 3. The shift ends: global sign-out.
            let before = handler.entries.count
            let outcome = try await scanner.signOut(parameters: SignOutParameters(reason: .shiftEnd))
            #expect(outcome.global)
            let signOutEntries = Array(handler.entries.dropFirst(before))

            // A passphrase-protected store opened with the same logger.
            let passphrase = "correct horse battery staple \(UUID().uuidString)"
            let lockedDirectory = TemporaryStateDirectory("log-secrecy-passphrase")
            let locked = try KeychainStore(directory: lockedDirectory.url, key: .passphrase(passphrase),
                                           options: StoreOptions(synchronous: .normal), logger: logger)
            _ = locked

            // (a) Every step logged at debug or trace.
            func messages(_ entries: [InMemoryLogHandler.Entry]) -> [String] {
                entries.filter { $0.level <= .debug }.map(\.message.description)
            }
            let signIn = messages(signInEntries), refresh = messages(refreshEntries), signOut = messages(signOutEntries)
            for expected in ["interactive sign-in started", "discovery document fetched and cached", "device code sign-in started",
                             "token grant received", "ID token validated", "interactive sign-in succeeded"] {
                #expect(signIn.contains(expected), "sign-in did not log \(expected): \(signIn)")
            }
            #expect(signInEntries.contains { $0.level == .trace }, "cache hits (discovery, keys) and pending polls log at trace")
            for expected in ["silent token: redeeming the refresh token", "refresh started", "token grant received", "refresh succeeded",
                             "silent token refreshed and cached"] {
                #expect(refresh.contains(expected), "the refresh did not log \(expected): \(refresh)")
            }
            for expected in ["sign-out started", "signed out"] {
                #expect(signOut.contains(expected), "the sign-out did not log \(expected): \(signOut)")
            }

            // (b) No secret in any entry. Collected from the run, not written down.
            var secrets: [String: Set<String>] = transport.secrets
            secrets["user_code", default: []].formUnion(shownCode.withLock { $0 }.map { [$0] } ?? [])
            secrets["access_token", default: []].formUnion([signedIn.accessToken, refreshed.accessToken])
            if let idToken = signedIn.idToken { secrets["id_token", default: []].insert(idToken) }
            for section in ["AccessToken", "RefreshToken", "IdToken"] {
                for case let entry as [String: Any] in (cache[section] as? [String: Any] ?? [:]).values {
                    if let secret = entry["secret"] as? String { secrets["cache \(section)", default: []].insert(secret) }
                }
            }
            let keyFile = try Data(contentsOf: directory.keyFile)
            #expect(keyFile.count == 32)
            let hex = keyFile.map { String(format: "%02x", $0) }.joined()
            secrets["master key"] = [hex, hex.uppercased(), keyFile.base64EncodedString(), Base64URL.encode(keyFile)]
            secrets["passphrase"] = [passphrase]
            for required in ["device_code", "user_code", "access_token", "refresh_token", "id_token", "cache RefreshToken"] {
                #expect(!(secrets[required] ?? []).isEmpty, "the run yielded no \(required) to look for")
            }
            // A JWT leaks if any of its parts does (the payload names the user; the signature proves it).
            var needles: [(String, String)] = []
            for (kind, values) in secrets {
                for value in values {
                    needles.append((kind, value))
                    let parts = value.split(separator: ".")
                    if parts.count == 3 { needles += parts.filter { $0.count >= 16 }.map { (kind + " part", String($0)) } }
                }
            }
            let entries = handler.entries
            #expect(entries.count > 10)
            for entry in entries {
                let rendered = texts(of: entry)
                for (kind, needle) in needles where rendered.contains(where: { $0.contains(needle) }) {
                    // Names the entry and its metadata keys, not the values: the failure output stays free of the secret.
                    let message = entry.message.description.contains(needle) ? "(message withheld)" : entry.message.description
                    Issue.record("a \(kind) appears in the log entry \(entry.level) \"\(message)\" (metadata keys: \(entry.metadata.keys.sorted()))")
                }
            }
        }
    }
}
