import Foundation
import SharedDeviceClient
import Testing
import VarlinkServer

/// The app's client against the real broker and server, both in the test's process (`InProcessBroker`), the
/// caller taken for the scanner app: the device, the current account, the keychain, a limit, the account
/// changes, and a cancelled call's connection closing. (Sign-ins need the identity provider: the daemon
/// suites in DevicectlTests run them.)
@Suite struct InProcessClientTests {
    @Test func theCallerIsTheAppOfTheInjectedUidAndTheDeviceIsThePolicys() async throws {
        try await InProcessBroker.with { broker in
            let app = broker.client()
            let caller = try await app.caller()
            #expect(
                caller.uid == Int(InProcessBroker.scannerUID) && caller.appID == "com.contoso.kiosk.scanner",
                "\(caller)"
            )
            #expect(caller.accessGroups.first == "com.contoso.kiosk.scanner")
            let device = try await app.deviceInformation()
            #expect(device.mode == .shared, "\(device)")
            #expect(
                device.deviceName == "Front desk kiosk 3" && device.policyID == "contoso-frontdesk-kiosk-2026-11",
                "\(device)"
            )
        }
    }

    @Test func nobodyIsSignedInOnAFreshDevice() async throws {
        try await InProcessBroker.with { broker in
            let app = broker.client()
            let current = try await app.currentAccount()
            #expect(current.current == nil && current.previous == nil, "\(current)")
            #expect(try await app.accounts().isEmpty)
        }
    }

    @Test func aUidThePolicyDoesNotListIsToldSoByItsUid() async throws {
        try await InProcessBroker.with(caller: 1003) { broker in
            do throws(SharedDeviceClientError) {
                _ = try await broker.client().currentAccount()
                Issue.record("a uid outside the policy was answered")
            } catch  where error.code == .callerNotInPolicy {
                #expect(error.uid == 1003, "\(error.message)")
            } catch {
                Issue.record("not CallerNotInPolicy: \(error)")
            }
        }
    }

    @Test func aSecretIsAddedFoundUpdatedAndDeleted() async throws {
        try await InProcessBroker.with { broker in
            let app = broker.client()
            let query = ItemQuery(service: "scanner-api", account: "device")
            let added = try await app.addGenericPassword(
                service: "scanner-api",
                account: "device",
                secret: Data("first".utf8),
                label: "API key"
            )
            #expect(added.accessGroup == "com.contoso.kiosk.scanner" && added.label == "API key", "\(added)")
            // The same service and account again: a duplicate.
            do throws(SharedDeviceClientError) {
                try await app.addGenericPassword(service: "scanner-api", account: "device", secret: Data("again".utf8))
                Issue.record("a duplicate was added")
            } catch {
                #expect(error.keychainStatus == -25299, "\(error)")
            }
            #expect(try await app.findGenericPassword(query).secret == Data("first".utf8))
            #expect(
                try await app.updateGenericPassword(
                    query,
                    secret: Data("second".utf8),
                    changes: ItemChanges(label: "Rotated")
                ) == 1
            )
            let updated = try await app.findGenericPassword(query)
            #expect(updated.secret == Data("second".utf8) && updated.label == "Rotated", "\(updated)")
            #expect(try await app.listGenericPasswords().map(\.service) == ["scanner-api"])
            #expect(try await app.deleteGenericPassword(query) == 1)
            do throws(SharedDeviceClientError) {
                _ = try await app.findGenericPassword(query)
                Issue.record("a deleted item was found")
            } catch {
                #expect(error.isItemNotFound, "\(error)")
            }
            do throws(SharedDeviceClientError) {
                _ = try await app.deleteGenericPassword(query)
                Issue.record("deleting nothing succeeded")
            } catch {
                #expect(error.isItemNotFound, "\(error)")
            }
            #expect(try await app.deleteGenericPasswordIfPresent(query) == 0)
        }
    }

    @Test func aReplyOverTheServersLimitIsRefusedAndTheConnectionServesOn() async throws {
        let smallReplies: (inout VarlinkServerConfiguration) -> Void = { $0.maximumReplyBytes = 2048 }
        try await InProcessBroker.with(configure: smallReplies) { broker in
            let app = broker.client()
            for index in 0..<16 {
                try await app.addGenericPassword(
                    service: "scanner-\(index)",
                    account: "device",
                    secret: Data("s".utf8),
                    label: String(repeating: "l", count: 100)
                )
            }
            do throws(SharedDeviceClientError) {
                _ = try await app.listGenericPasswords()
                Issue.record("a listing over the reply limit was sent")
            } catch  where error.code == .limitExceeded {
                #expect(
                    error.limit == "replyBytes" && error.maximum == 2048,
                    "\(String(describing: error.limit)) \(String(describing: error.maximum))"
                )
                #expect(error.message.contains("narrow the query"), "\(error.message)")
            } catch {
                Issue.record("not the reply limit: \(error)")
            }
            // A narrower query, on the same pooled connection, is answered.
            #expect(try await app.findGenericPassword(ItemQuery(service: "scanner-3")).service == "scanner-3")
            #expect(
                broker.connections.peers.count == 1,
                "the refusal cost the connection: \(broker.connections.peers.count) open"
            )
        }
    }

    @Test func aSubscriptionStartsWithTheCurrentAccountAndItsCancellationClosesItsConnection() async throws {
        try await InProcessBroker.with { broker in
            let app = broker.client()
            let (first, firstSeen) = AsyncStream<AccountEvent>.makeStream()
            let subscriber = Task {
                for try await event in app.accountChanges() { firstSeen.yield(event) }
                firstSeen.finish()
            }
            var events = first.makeAsyncIterator()
            let subscribed = await events.next()
            guard case .subscribed(let current, _)? = subscribed else {
                subscriber.cancel()
                Issue.record("the first event was \(String(describing: subscribed))")
                return
            }
            #expect(current == nil)
            #expect(
                broker.connections.peers.map(\.peer.uid) == [InProcessBroker.scannerUID],
                "the subscription's connection is not the server's"
            )
            // The app stops listening: its task is cancelled, the sequence ends without an error, and the
            // subscription's connection closes (the broker's call with it).
            subscriber.cancel()
            try await subscriber.value
            #expect(await events.next() == nil)
            #expect(await broker.waitForConnections(0), "the cancelled subscription's connection stayed open")
        }
    }

    @Test func aCancelledCallThrowsCancelledAndSendsNothing() async throws {
        try await InProcessBroker.with { broker in
            let app = broker.client()
            let call = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await app.addGenericPassword(service: "never", account: "sent", secret: Data("x".utf8))
            }
            do {
                _ = try await call.value
                Issue.record("a cancelled call was made")
            } catch {
                #expect((error as? SharedDeviceClientError)?.code == .cancelled, "\(error)")
            }
            do throws(SharedDeviceClientError) {
                _ = try await app.findGenericPassword(ItemQuery(service: "never"))
                Issue.record("the cancelled call's item was added")
            } catch {
                #expect(error.isItemNotFound, "\(error)")
            }
        }
    }
}
