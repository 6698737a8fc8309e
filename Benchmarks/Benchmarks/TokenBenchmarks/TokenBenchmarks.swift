// An app's token calls against the local identity provider (glewlwyd, started by `tools/bench tokens` on
// 127.0.0.1:4596): a whole browser sign-in, acquireTokenSilent from the cache, a forced refresh over loopback
// HTTP, and ID-token validation alone (RS256, keys cached).
import Benchmark
import BenchmarkFixtures
import Foundation
import IdentityClient
import SharedDevice

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        timeUnits: .nanoseconds,
        units: [.mallocCountTotal: .count],
        warmupIterations: 1,
        maxDuration: .seconds(300)
    )

    registerBrowserSignIn()
    registerSilentCalls()
    registerIDTokenValidation()
}

/// A whole browser sign-in; the worker is signed out after each (untimed).
func registerBrowserSignIn() {
    let slot = FixtureSlot<TokenFixture>()
    Benchmark(
        "Browser sign-in (auth code + PKCE, token, ID-token validation, cache write)",
        configuration: .init(maxIterations: 5),
        closure: { benchmark in
            let fixture = try slot.get()
            benchmark.startMeasurement()
            try await fixture.signIn()
            benchmark.stopMeasurement()
            _ = try await fixture.app.signOut()
        },
        setup: { slot.fixture = try TokenFixture() },
        teardown: {
            slot.fixture?.remove()
            slot.fixture = nil
        }
    )
}

/// `acquireTokenSilent` from the cache, and with `forceRefresh` (a refresh-token grant plus the cache write).
func registerSilentCalls() {
    let cacheSlot = FixtureSlot<TokenFixture>()
    Benchmark(
        "acquireTokenSilent (from the cache)",
        configuration: .init(warmupIterations: 20, maxIterations: 2000),
        closure: { _ in
            let fixture = try cacheSlot.get()
            blackHole(try await fixture.app.acquireTokenSilent(scopes: TokenFixture.scopes))
        },
        setup: {
            let fixture = try TokenFixture()
            try await fixture.signIn()
            cacheSlot.fixture = fixture
        },
        teardown: {
            _ = try? await cacheSlot.fixture?.app.signOut()
            cacheSlot.fixture?.remove()
            cacheSlot.fixture = nil
        }
    )

    let refreshSlot = FixtureSlot<TokenFixture>()
    Benchmark(
        "acquireTokenSilent (forced refresh)",
        configuration: .init(warmupIterations: 2, maxIterations: 50),
        closure: { _ in
            let fixture = try refreshSlot.get()
            blackHole(try await fixture.app.acquireTokenSilent(scopes: TokenFixture.scopes, forceRefresh: true))
        },
        setup: {
            let fixture = try TokenFixture()
            try await fixture.signIn()
            refreshSlot.fixture = fixture
        },
        teardown: {
            _ = try? await refreshSlot.fixture?.app.signOut()
            refreshSlot.fixture?.remove()
            refreshSlot.fixture = nil
        }
    )
}

/// `IdentityClient.validateIDToken` of the sign-in's ID token: signature, issuer, audience, expiry, nonce.
func registerIDTokenValidation() {
    let slot = FixtureSlot<(fixture: TokenFixture, idToken: String, nonce: String?)>()
    Benchmark(
        "ID-token validation (RS256, keys cached)",
        configuration: .init(warmupIterations: 20, maxIterations: 1000),
        closure: { _ in
            let (fixture, idToken, nonce) = try slot.get()
            blackHole(try await fixture.app.identity.validateIDToken(idToken, nonce: nonce))
        },
        setup: {
            let fixture = try TokenFixture()
            guard let idToken = try await fixture.signIn().idToken else {
                throw BenchmarkFailure("the sign-in returned no ID token")
            }
            let parts = idToken.split(separator: ".")
            let claims =
                parts.count == 3
                ? Base64URL.decode(parts[1]).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
                : nil
            slot.fixture = (fixture, idToken, claims?["nonce"] as? String)
        },
        teardown: {
            _ = try? await slot.fixture?.fixture.app.signOut()
            slot.fixture?.fixture.remove()
            slot.fixture = nil
        }
    )
}
