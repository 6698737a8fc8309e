import BrokerContract
import Foundation
import SharedDeviceClient
import Varlink

/// `victim SOCKET N LABEL` (as an app's uid): the app's silent token, N times through SharedDeviceClient
/// (`LABEL-client`) and N times on one connection with the generated contract (`LABEL-one`), p50/p99 in µs;
/// run quiet and again while attackers run.
func victim(socket: String, count: Int, label: String) async {
    do {
        let application = thinClient(socket)
        await measure("\(label)-client", count: count) { _ = try await application.acquireTokenSilent(scopes: scopes) }
        let persistent = try PersistentBroker(socket)
        await measure("\(label)-one", count: count) {
            _ = try persistent.call(Broker1.AcquireTokenSilent.self, .init(scopes: scopes))
        }
    } catch {
        fail("victim: \(error)")
    }
}

/// `root SOCKET N LABEL` (root): root's GetCaller (`LABEL-root-caller`) and GetStatus (`LABEL-root-status`,
/// what `devicectl status` asks: it lists the connections, so it grows with the attackers'), N times each on one
/// connection, p50/p99 in µs.
func rootCalls(socket: String, count: Int, label: String) async {
    do {
        let persistent = try PersistentBroker(socket)
        await measure("\(label)-root-caller", count: count) { _ = try persistent.call(Broker1.GetCaller.self, .init()) }
        await measure("\(label)-root-status", count: count) { _ = try persistent.call(Broker1.GetStatus.self, .init()) }
    } catch {
        fail("root: \(error)")
    }
}
