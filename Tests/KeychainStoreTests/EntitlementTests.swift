import Foundation
import KeychainStore
import StoreTestSupport
import Testing

/// Access groups keep apps apart the way keychain-access-groups entitlements do.
struct EntitlementTests {
    @Test func namingAGroupTheCallerIsNotEntitledToIsMissingEntitlementForEveryOperation() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        try store.add(
            NewItem(accessGroup: "com.contoso.scanner", service: "svc", account: "a", secret: Data("mine")),
            as: Apps.scanner
        )
        let foreign = ItemQuery(accessGroup: "com.contoso.scanner", service: "svc")
        expectError(.missingEntitlement) {
            try store.add(
                NewItem(accessGroup: "com.contoso.scanner", service: "svc", account: "b", secret: Data("x")),
                as: Apps.timeclock
            )
        }
        expectError(.missingEntitlement) { try store.find(foreign, as: Apps.timeclock) }
        expectError(.missingEntitlement) { try store.findAll(foreign, as: Apps.timeclock) }
        expectError(.missingEntitlement) {
            try store.update(foreign, with: ItemChanges(secret: Data("stolen")), as: Apps.timeclock)
        }
        expectError(.missingEntitlement) { try store.delete(foreign, as: Apps.timeclock) }
        expectError(.missingEntitlement) { try store.metadata(matching: foreign, as: Apps.timeclock) }
        // Nothing was changed by the denied calls.
        #expect(try store.find(foreign, as: Apps.scanner).secret == Data("mine"))
        #expect(try store.findAll(ItemQuery(accessGroup: "com.contoso.scanner"), as: Apps.scanner).count == 1)
    }

    @Test func queryWithoutGroupOnlySeesTheCallersGroupsSoOtherAppsItemsAreNotFound() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        try store.add(
            NewItem(accessGroup: "com.contoso.scanner", service: "svc", account: "a", secret: Data("mine")),
            as: Apps.scanner
        )
        expectError(.itemNotFound) { try store.find(ItemQuery(service: "svc"), as: Apps.timeclock) }
        expectError(.itemNotFound) { try store.delete(ItemQuery(service: "svc"), as: Apps.timeclock) }
        expectError(.itemNotFound) {
            try store.update(ItemQuery(service: "svc"), with: ItemChanges(label: "x"), as: Apps.timeclock)
        }
        #expect(try store.metadata(as: Apps.outsider).isEmpty)
        #expect(try store.find(ItemQuery(service: "svc"), as: Apps.scanner).secret == Data("mine"))
    }

    @Test func aSharedGroupIsVisibleToEveryEntitledApp() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        try store.add(
            NewItem(accessGroup: Apps.sharedGroup, service: "rt", account: "worker", secret: Data("shared")),
            as: Apps.scanner
        )
        #expect(try store.find(ItemQuery(service: "rt"), as: Apps.timeclock).secret == Data("shared"))
        expectError(.itemNotFound) { try store.find(ItemQuery(service: "rt"), as: Apps.outsider) }
        expectError(.missingEntitlement) {
            try store.find(ItemQuery(accessGroup: Apps.sharedGroup, service: "rt"), as: Apps.outsider)
        }
    }

    @Test func anAppWithoutGroupsCannotAdd() throws {
        let directory = TemporaryStateDirectory()
        let store = try openStore(directory)
        let empty = try AppIdentity(appID: "com.empty", accessGroups: [])
        expectError(.missingEntitlement) {
            try store.add(NewItem(service: "svc", account: "a", secret: Data("x")), as: empty)
        }
    }

    @Test(arguments: ["", ".leading", "trailing.", "has space", "slash/group", String(repeating: "a", count: 256)])
    func malformedAccessGroupNamesAreRejected(name: String) {
        expectError(.invalidParameter) { try AppIdentity(appID: "app", accessGroups: [name]) }
    }
}
