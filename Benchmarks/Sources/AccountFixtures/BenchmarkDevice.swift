// A provisioned shared-mode device with many apps, for the account manager's benchmarks.
import BenchmarkFixtures
public import Foundation
public import KeychainStore
public import SharedDevice

/// A shared-mode device in a fresh store (synchronous NORMAL) with `appCount` apps, each entitled to the shared
/// MSAL group and a group of its own, and an `AccountManager` over it.
public final class BenchmarkDevice {
    /// The device's store.
    public let store: KeychainStore
    /// The account manager over the store.
    public let accounts: AccountManager
    /// The policy's apps, in order.
    public let apps: [AppIdentity]
    /// The sign-in context of every token saved.
    public let context = TokenRequestContext(
        clientID: "kiosk-apps",
        environment: "127.0.0.1:4593",
        realm: "contoso",
        requestedScopes: ["openid"]
    )
    /// The directory holding the store.
    public let directory: URL
    private let scratch: ScratchDirectory

    /// Provisions a fresh device with `appCount` apps.
    public init(appCount: Int) throws {
        scratch = try ScratchDirectory("account-benchmarks")
        directory = scratch.url
        store = try KeychainStore(directory: directory, options: StoreOptions(synchronous: .normal))
        let device = ManagedDevice(store: store)
        try device.provision(policyDocument: try Self.policy(appCount: appCount), actor: "account-benchmarks")
        apps = try (0..<appCount).map { index in
            guard let app = try device.appIdentity("com.contoso.bench.app\(index)", actor: "account-benchmarks") else {
                throw BenchmarkFailure("app \(index) is missing from the provisioned policy")
            }
            return app
        }
        accounts = AccountManager(device: device)
    }

    /// Signs `worker` in through the first app and gives every app `tokens` access tokens (distinct scopes)
    /// in its own group, in one transaction.
    public func signIn(worker: Int, tokensPerApp tokens: Int) throws {
        try accounts.signIn(
            try TokenResponses.response(worker: worker, scope: "openid profile"),
            context: context,
            app: apps[0]
        )
        let responses = try (0..<tokens).map {
            try TokenResponses.response(worker: worker, scope: "api://bench/scope\($0)")
        }
        let (apps, context, tokenCache) = (apps, context, accounts.tokenCache)
        try store.writeTransaction { tx in
            for app in apps {
                for response in responses {
                    try tokenCache.save(response, context: context, as: app, accessGroup: app.accessGroups[1], in: tx)
                }
            }
        }
    }

    /// Removes the files.
    public func remove() { scratch.remove() }

    /// A shared-mode policy with `appCount` apps.
    public static func policy(appCount: Int) throws -> Data {
        let apps: [[String: Any]] = (0..<appCount).map { index in
            [
                "id": "com.contoso.bench.app\(index)",
                "accessGroups": ["com.microsoft.adalcache", "com.contoso.bench.app\(index)"], "uid": 2000 + index,
            ]
        }
        let document: [String: Any] = [
            "version": 1, "device": ["name": "bench kiosk", "mode": "shared"],
            "authority": ["issuer": "http://127.0.0.1:4593/api/oidc", "clientId": "kiosk-apps", "scopes": ["openid"]],
            "apps": apps, "audit": ["checkpointInterval": 100],
        ]
        return try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys])
    }
}
