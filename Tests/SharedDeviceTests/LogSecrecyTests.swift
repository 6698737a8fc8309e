import Foundation
import IdentityClient
import IdentityTestSupport
import InMemoryLogging
import KeychainStore
import Logging
import SharedDevice
import StoreTestSupport
import Synchronization
import Testing

/// A transport that passes every request to the real one and keeps the secrets that cross it, both ways:
/// the device code and user code, the authorization code and PKCE verifier, every access, refresh and
/// ID token.
private final class SecretRecordingTransport: HTTPTransport {
    static let fields = [
        "device_code", "user_code", "code", "code_verifier", "access_token", "refresh_token", "id_token",
    ]
    private let upstream = CurlTransport()
    private let recorded = Mutex<[String: Set<String>]>([:])

    /// The secrets seen, by field name (`device_code`, `code_verifier`, `access_token`, …).
    var secrets: [String: Set<String>] { recorded.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws(IdentityError) -> HTTPResponse {
        let form = request.body.map { ScriptedTransport.decodeForm(String(decoding: $0, as: UTF8.self)) } ?? [:]
        let response = try await upstream.send(request)
        let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] ?? [:]
        recorded.withLock { recorded in
            for field in Self.fields {
                for value in [form[field], object[field] as? String] {
                    if let value, !value.isEmpty { recorded[field, default: []].insert(value) }
                }
            }
        }
        return response
    }
}

/// A kiosk whose store, device and apps all log to one in-memory handler at `.trace`, talking to the
/// tests' glewlwyd through a `SecretRecordingTransport`.
private final class LoggedKiosk {
    let handler: InMemoryLogHandler
    let logger: Logger
    let provider: LocalIdentityProvider
    let directory = TemporaryStateDirectory("log-secrecy")
    let store: KeychainStore
    let device: ManagedDevice
    let transport = SecretRecordingTransport()

    init() async throws {
        var handler = InMemoryLogHandler()
        handler.logLevel = .trace
        self.handler = handler
        logger = Logger(label: "log-secrecy", factory: { [handler] _ in handler })
        provider = try await LocalIdentityProvider.shared()
        store = try KeychainStore(directory: directory.url, options: StoreOptions(synchronous: .normal), logger: logger)
        device = ManagedDevice(store: store, logger: logger)
        try device.provision(policyDocument: try provider.kioskPolicy(), actor: DeviceFixture.admin)
    }

    func app(_ id: String) throws -> ApplicationEngine {
        let policy = try #require(try device.policy())
        return try ApplicationEngine(
            configuration: ApplicationEngineConfiguration(appID: id, policy: policy),
            device: device,
            transport: transport,
            logger: logger
        )
    }

    /// The entries logged while `body` ran.
    func entries<T>(during body: () async throws -> T) async rethrows -> (T, [InMemoryLogHandler.Entry]) {
        let before = handler.entries.count
        let result = try await body()
        return (result, Array(handler.entries.dropFirst(before)))
    }

    /// The secrets of the run: what crossed the transport, the app's cache export, the master key file.
    func secrets(of app: ApplicationEngine, also more: [String: Set<String>]) throws -> [String: Set<String>] {
        var secrets = transport.secrets.merging(more) { $0.union($1) }
        let export = try TokenCache().exportJSON(as: app.app, in: store)
        let cache = try #require(try JSONSerialization.jsonObject(with: export) as? [String: Any])
        for section in ["AccessToken", "RefreshToken", "IdToken"] {
            for case let entry as [String: Any] in (cache[section] as? [String: Any] ?? [:]).values {
                if let secret = entry["secret"] as? String { secrets["cache \(section)", default: []].insert(secret) }
            }
        }
        let keyFile = try Data(contentsOf: directory.keyFile)
        #expect(keyFile.count == 32)
        let hex = keyFile.map { String(format: "%02x", $0) }.joined()
        secrets["master key"] = [hex, hex.uppercased(), keyFile.base64EncodedString(), Base64URL.encode(keyFile)]
        return secrets
    }

    /// Records an issue for every secret that appears in any entry's message, metadata or error. A JWT
    /// leaks if any of its parts does (the payload names the user; the signature proves it).
    func expectNoSecretLogged(_ secrets: [String: Set<String>], sourceLocation: SourceLocation = #_sourceLocation) {
        var needles: [(kind: String, value: String)] = []
        for (kind, values) in secrets {
            for value in values {
                needles.append((kind, value))
                let parts = value.split(separator: ".")
                if parts.count == 3 { needles += parts.filter { $0.count >= 16 }.map { (kind + " part", String($0)) } }
            }
        }
        let entries = handler.entries
        #expect(entries.count > 10, sourceLocation: sourceLocation)
        for entry in entries {
            let rendered = texts(of: entry)
            for (kind, needle) in needles where rendered.contains(where: { $0.contains(needle) }) {
                // Names the entry and its metadata keys, not the values: the failure output stays free of the secret.
                let message =
                    entry.message.description.contains(needle) ? "(message withheld)" : entry.message.description
                Issue.record(
                    "a \(kind) appears in the log entry \(entry.level) \"\(message)\" (metadata keys: \(entry.metadata.keys.sorted()))",
                    sourceLocation: sourceLocation
                )
            }
        }
    }
}

/// Every text of a log entry: its message, all metadata keys and values (nested ones rendered
/// recursively) and its error, however it prints.
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

/// The messages of the entries at debug level or below.
private func debugMessages(_ entries: [InMemoryLogHandler.Entry]) -> [String] {
    entries.filter { $0.level <= .debug }.map(\.message.description)
}

extension ApplicationEngineTests {
    /// Whole shifts against the real provider with every layer logging to one in-memory handler at
    /// `.trace`: the logs tell what happened at debug and trace level, and never carry a secret.
    ///
    /// Nested in `ApplicationEngineTests`, whose `.serialized` trait keeps these from running beside
    /// that suite's sign-ins against the same glewlwyd (which fails concurrent sign-ins now and then).
    @Suite struct LogSecrecyTests {
        @Test func aDeviceCodeShiftLogsEveryStepButNoTokenCodeKeyOrPassphrase() async throws {
            let kiosk = try await LoggedKiosk()
            let scanner = try kiosk.app(ProviderKiosk.scanner)
            let provider = kiosk.provider

            // 1. Device-code sign-in, approved by the worker as soon as the code shows.
            let shownCode = Mutex<String?>(nil)
            let (signedIn, signInEntries) = try await kiosk.entries {
                try await scanner.acquireToken(
                    InteractiveTokenParameters(
                        scopes: ["User.Read"],
                        flow: .deviceCode(showCode: { session in
                            shownCode.withLock { $0 = session.userCode }
                            Thread.detachNewThread { try? provider.approve(code: session.userCode, user: "worker1") }
                        })
                    )
                )
            }

            // 2. A silent token with a forced refresh, and the userinfo call with `Authorization: Bearer`.
            let (refreshed, refreshEntries) = try await kiosk.entries {
                let refreshed = try await scanner.acquireTokenSilent(scopes: ["User.Read"], forceRefresh: true)
                let userinfo = try await scanner.identity.get(
                    try await scanner.identity.userInfoEndpoint(),
                    accessToken: refreshed.accessToken
                )
                #expect(userinfo.status == 200)
                return refreshed
            }
            #expect(refreshed.source == .refresh)
            var secrets = try kiosk.secrets(
                of: scanner,
                also: [
                    "user_code": Set(shownCode.withLock { $0 }.map { [$0] } ?? []),
                    "access_token": [signedIn.accessToken, refreshed.accessToken],
                    "id_token": Set(signedIn.idToken.map { [$0] } ?? []),
                ]
            )

            // 3. The shift ends: global sign-out.
            let (outcome, signOutEntries) = try await kiosk.entries {
                try await scanner.signOut(parameters: SignOutParameters(reason: .shiftEnd))
            }
            #expect(outcome.global)

            // A passphrase-protected store opened with the same logger.
            let passphrase = "correct horse battery staple \(UUID().uuidString)"
            let lockedDirectory = TemporaryStateDirectory("log-secrecy-passphrase")
            _ = try KeychainStore(
                directory: lockedDirectory.url,
                key: .passphrase(passphrase),
                options: StoreOptions(synchronous: .normal),
                logger: kiosk.logger
            )
            secrets["passphrase"] = [passphrase]

            // (a) Every step logged at debug or trace.
            let signIn = debugMessages(signInEntries)
            let refresh = debugMessages(refreshEntries)
            let signOut = debugMessages(signOutEntries)
            for expected in [
                "interactive sign-in started", "discovery document fetched and cached", "device code sign-in started",
                "signing keys fetched and cached", "token grant received", "ID token validated",
                "interactive sign-in succeeded",
            ] {
                #expect(signIn.contains(expected), "sign-in did not log \(expected): \(signIn)")
            }
            #expect(
                signInEntries.contains { $0.level == .trace },
                "cache hits (discovery, keys) and pending polls log at trace"
            )
            for expected in [
                "silent token: redeeming the refresh token", "refresh started", "token grant received",
                "refresh succeeded",
                "silent token refreshed and cached",
            ] {
                #expect(refresh.contains(expected), "the refresh did not log \(expected): \(refresh)")
            }
            for expected in ["sign-out started", "signed out"] {
                #expect(signOut.contains(expected), "the sign-out did not log \(expected): \(signOut)")
            }

            // (b) No secret in any entry. Collected from the run, not written down.
            for required in [
                "device_code", "user_code", "access_token", "refresh_token", "id_token", "cache RefreshToken",
                "master key",
            ] {
                #expect(!(secrets[required] ?? []).isEmpty, "the run yielded no \(required) to look for")
            }
            kiosk.expectNoSecretLogged(secrets)
        }

        @Test func aBrowserSignInLogsItsStepsButNoCodeVerifierStateOrToken() async throws {
            let kiosk = try await LoggedKiosk()
            let timeclock = try kiosk.app(ProviderKiosk.timeclock)
            let provider = kiosk.provider
            let authorizationURL = Mutex<URL?>(nil)
            let (signedIn, signInEntries) = try await kiosk.entries {
                try await timeclock.acquireToken(
                    InteractiveTokenParameters(
                        scopes: ["User.Read"],
                        flow: .browser(openBrowser: { url in
                            authorizationURL.withLock { $0 = url }
                            Thread.detachNewThread { try? provider.browse(url, user: "worker2") }
                        }),
                        loginHint: "worker2",
                        browserTimeout: 60
                    )
                )
            }
            let (_, signOutEntries) = try await kiosk.entries {
                try await timeclock.signOut(parameters: SignOutParameters(reason: .user))
            }

            let signIn = debugMessages(signInEntries)
            for expected in [
                "interactive sign-in started", "browser sign-in started", "browser redirect received",
                "token grant received", "ID token validated", "interactive sign-in succeeded",
            ] {
                #expect(signIn.contains(expected), "the browser sign-in did not log \(expected): \(signIn)")
            }
            #expect(debugMessages(signOutEntries).contains("signed out"))

            // The authorization request's state, nonce and PKCE challenge, with what crossed the transport.
            let url = try #require(authorizationURL.withLock { $0 })
            let query = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
            var secrets = try kiosk.secrets(
                of: timeclock,
                also: [
                    "access_token": [signedIn.accessToken], "id_token": Set(signedIn.idToken.map { [$0] } ?? []),
                ]
            )
            for name in ["state", "nonce", "code_challenge"] {
                secrets[name] = Set(query.filter { $0.name == name }.compactMap(\.value))
            }
            for required in [
                "code", "code_verifier", "state", "nonce", "code_challenge", "access_token", "refresh_token",
                "id_token",
            ] {
                #expect(!(secrets[required] ?? []).isEmpty, "the run yielded no \(required) to look for")
            }
            kiosk.expectNoSecretLogged(secrets)
        }
    }
}
