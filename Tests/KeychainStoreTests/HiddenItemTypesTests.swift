import Foundation
import KeychainStore
import StoreTestSupport
import Testing

/// Item types hidden from a caller (`AppIdentity.hidingItemTypes`): the token cache a broker keeps in a
/// group it shares with apps is invisible to their keychain calls and cannot be written through them.
struct HiddenItemTypesTests {
    static let accessToken: UInt32 = 2001, refreshToken: UInt32 = 2002
    static let appView = Apps.timeclock.hidingItemTypes([accessToken, refreshToken])
    static let shared = Apps.sharedGroup

    /// A store whose shared group holds two token items (as the broker's token cache writes them, with the
    /// plain identity) and one ordinary item the apps share.
    static func store(_ directory: TemporaryStateDirectory) throws -> KeychainStore {
        let store = try openStore(directory)
        try store.add(
            NewItem(
                accessGroup: shared,
                service: "refreshtoken-kiosk--",
                account: "jo",
                secret: Data("rt-secret"),
                type: refreshToken
            ),
            as: Apps.scanner
        )
        try store.add(
            NewItem(
                accessGroup: shared,
                service: "accesstoken-kiosk-t-user.read",
                account: "jo",
                secret: Data("at-secret"),
                type: accessToken
            ),
            as: Apps.scanner
        )
        try store.add(
            NewItem(accessGroup: shared, service: "wifi", account: "kiosk", secret: Data("shared-secret")),
            as: Apps.scanner
        )
        return store
    }

    @Test func hiddenItemsAreNotFoundByAnyQuery() throws {
        let directory = TemporaryStateDirectory()
        let store = try Self.store(directory)
        expectError(.itemNotFound) {
            try store.find(ItemQuery(accessGroup: Self.shared, type: Self.refreshToken), as: Self.appView)
        }
        // The whole key (the point read) does not reach it either.
        expectError(.itemNotFound) {
            try store.find(
                ItemQuery(accessGroup: Self.shared, service: "refreshtoken-kiosk--", account: "jo"),
                as: Self.appView
            )
        }
        expectError(.itemNotFound) {
            try store.find(ItemQuery(service: "refreshtoken-kiosk--", account: "jo"), as: Self.appView)
        }
        // Everything in the group: only the ordinary item.
        let all = try store.findAll(ItemQuery(accessGroup: Self.shared), as: Self.appView)
        #expect(all.map(\.metadata.service) == ["wifi"])
        #expect(
            try store.metadata(matching: ItemQuery(accessGroup: Self.shared), as: Self.appView).map(\.service) == [
                "wifi"
            ]
        )
        // The broker's own view is unchanged.
        #expect(
            try store.find(ItemQuery(accessGroup: Self.shared, type: Self.refreshToken), as: Apps.timeclock).secret
                == Data("rt-secret")
        )
    }

    @Test func hiddenItemsCannotBeAddedRewrittenOrDeleted() throws {
        let directory = TemporaryStateDirectory()
        let store = try Self.store(directory)
        expectError(.missingEntitlement) {
            try store.add(
                NewItem(
                    accessGroup: Self.shared,
                    service: "accesstoken-forged",
                    account: "jo",
                    secret: Data("forged"),
                    type: Self.accessToken
                ),
                as: Self.appView
            )
        }
        expectError(.itemNotFound) {
            try store.update(
                ItemQuery(accessGroup: Self.shared, type: Self.accessToken),
                with: ItemChanges(secret: Data("forged")),
                as: Self.appView
            )
        }
        // An update over the whole group changes only what the caller sees; giving an item a hidden type is refused.
        #expect(
            try store.update(ItemQuery(accessGroup: Self.shared), with: ItemChanges(label: "seen"), as: Self.appView)
                == 1
        )
        expectError(.missingEntitlement) {
            try store.update(
                ItemQuery(accessGroup: Self.shared, service: "wifi"),
                with: ItemChanges(type: Self.accessToken),
                as: Self.appView
            )
        }
        // A delete of the whole group (indexed attributes only: the fast path for other callers) spares them.
        #expect(try store.delete(ItemQuery(accessGroup: Self.shared), as: Self.appView) == 1)
        expectError(.itemNotFound) {
            try store.delete(ItemQuery(accessGroup: Self.shared, service: "refreshtoken-kiosk--"), as: Self.appView)
        }
        let left = try store.findAll(ItemQuery(accessGroup: Self.shared), as: Apps.scanner)
        #expect(Set(left.map(\.secret)) == [Data("rt-secret"), Data("at-secret")])
        #expect(left.allSatisfy { $0.metadata.label == nil }, "a hidden item was rewritten")
    }
}
