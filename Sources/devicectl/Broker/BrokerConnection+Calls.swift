import BrokerContract
import Foundation
import KeychainStore
import SharedDevice
import SharedDeviceClient

// The keychain's item types by their plain names here; the client's same-named ones are SharedDeviceClient.X.
import struct KeychainStore.ItemChanges
import struct KeychainStore.ItemQuery
import struct KeychainStore.KeychainItem

// The broker's answers in the library's types, as the engine gives them to root's --app commands, so that
// both routes print alike. With BrokerMapping (the conversions) and BrokerErrors, the only files of devicectl
// that see both the client's types and the library's.

extension BrokerConnection {
    /// The broker's state (administrators only: root or the policy's administratorsGroup).
    func status() async throws -> BrokerStatus {
        BrokerStatus(
            try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
                try await interface.call(Broker1.GetStatus.self, .init()).status
            }
        )
    }

    /// Tells the broker the worker is active; the idle clock (`nil`: the policy sets no idle sign-out).
    func reportActivity() async throws -> SharedDevice.IdleState? {
        try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
            try await application.reportActivity()
        }
        .map(SharedDevice.IdleState.init)
    }

    /// The device's information as the broker gives it to this app.
    func extraDeviceInformation() async throws -> [String: String] {
        try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
            try await application.deviceInformation()
        }.extraDeviceInformation
    }

    /// The current and previous account for this app.
    func currentAccount() async throws -> SharedDevice.CurrentAccount {
        SharedDevice.CurrentAccount(
            try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
                try await application.currentAccount()
            }
        )
    }

    /// A token without UI: from the broker's cache, else refreshed by the broker.
    func acquireTokenSilent(
        scopes: [String],
        forceRefresh: Bool = false,
        authority: String? = nil
    ) async throws -> SharedDevice.AuthenticationResult {
        SharedDevice.AuthenticationResult(
            try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
                try await application.acquireTokenSilent(
                    scopes: scopes,
                    forceRefresh: forceRefresh,
                    authority: authority
                )
            }
        )
    }

    /// The accounts this app holds (the worker's, one per B2C user flow).
    func accounts() async throws -> [DeviceAccount] {
        try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in try await application.accounts() }
            .map(DeviceAccount.init)
    }

    /// Signs a worker in as this app: the broker runs the sign-in and keeps the tokens.
    func signIn(
        scopes: [String],
        loginHint: String?,
        flow: SignInFlow,
        authority: String? = nil
    ) async throws -> SharedDevice.AuthenticationResult {
        let parameters = SharedDeviceClient.InteractiveTokenParameters(
            scopes: scopes,
            flow: flow.clientFlow,
            loginHint: loginHint,
            authority: authority
        )
        return SharedDevice.AuthenticationResult(
            try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
                try await application.acquireToken(parameters)
            }
        )
    }

    /// A shift change: the current worker out of every app (`signedOut` hears who, before the sign-in
    /// starts), then the next one in. If the sign-in fails the device stays signed out.
    func switchWorker(
        scopes: [String],
        reason: SharedDevice.SignOutReason,
        loginHint: String?,
        flow: SignInFlow,
        signedOut: @escaping @Sendable (DeviceAccount?) -> Void
    ) async throws -> SharedDevice.AuthenticationResult {
        guard let reason = SharedDeviceClient.SignOutReason(rawValue: reason.rawValue) else {
            throw CLIError(exitCode: .usage, "a switch's reason is shift-end or user")
        }
        let parameters = SharedDeviceClient.InteractiveTokenParameters(
            scopes: scopes,
            flow: flow.clientFlow,
            loginHint: loginHint
        )
        let outcome = try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
            try await application.switchWorker(parameters, reason: reason) { result in
                signedOut(result.account.map(DeviceAccount.init))
            }
        }
        return SharedDevice.AuthenticationResult(outcome.result)
    }

    /// The broker's sign-out with `reason` as given (the broker decides which reasons the caller may give:
    /// `admin` is an administrator's); the counts are the broker's.
    func signOut(reason: SharedDevice.SignOutReason) async throws -> BrokerSignOutSummary {
        let reply = try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
            try await interface.call(Broker1.SignOut.self, .init(reason: reason.rawValue))
        }
        return BrokerSignOutSummary(
            account: reply.account.map(DeviceAccount.init),
            global: reply.global,
            itemsRemoved: reply.itemsRemoved
        )
    }

    // MARK: - Keychain

    /// Adds a generic password in the app's group (or `item.accessGroup`).
    func add(_ item: NewItem) async throws -> ItemMetadata {
        ItemMetadata(
            try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
                try await application.addGenericPassword(
                    service: item.service,
                    account: item.account,
                    secret: item.secret,
                    accessGroup: item.accessGroup,
                    label: item.label,
                    type: item.type,
                    generic: item.generic
                )
            }
        )
    }

    /// The first matching item with its secret, or every match with `all`.
    func find(_ query: ItemQuery, all: Bool) async throws -> [KeychainItem] {
        let selection = SharedDeviceClient.ItemQuery(query)
        return try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
            all
                ? try await application.findAllGenericPasswords(selection)
                : [try await application.findGenericPassword(selection)]
        }.map(KeychainItem.init)
    }

    /// Changes every matching item; returns how many.
    func update(_ query: ItemQuery, with changes: ItemChanges) async throws -> Int {
        try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
            try await application.updateGenericPassword(
                SharedDeviceClient.ItemQuery(query),
                secret: changes.secret,
                changes: SharedDeviceClient.ItemChanges(changes)
            )
        }
    }

    /// Deletes every matching item; returns how many.
    func delete(_ query: ItemQuery) async throws -> Int {
        try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
            try await application.deleteGenericPassword(SharedDeviceClient.ItemQuery(query))
        }
    }

    /// The attributes of every matching item (no secrets).
    func metadata(matching query: ItemQuery) async throws -> [ItemMetadata] {
        try await reportingBrokerErrors { () async throws(SharedDeviceClientError) in
            try await application.listGenericPasswords(SharedDeviceClient.ItemQuery(query))
        }.map(ItemMetadata.init)
    }
}

/// `devicectl signout --json` through the broker.
struct BrokerSignOutSummary: Encodable {
    var account: DeviceAccount?
    var global: Bool
    var itemsRemoved: Int
}
