import BrokerContract
import Foundation
import Varlink

#if canImport(Glibc)
import Glibc
#endif

/// `connections NAME=SOCKET… N` (as an app's uid): what identifying the peer of a new connection costs. For each
/// named broker, interleaved call by call: a new connection, its first AcquireTokenSilent and the close (timed from
/// before connect() to the reply: the broker accepts, reads the peer's credentials, pidfd and sandbox, admits it
/// by the policy, then serves the call), and the same call on a connection kept open. Prints
/// `connect-first-NAME p50 X p99 Y retries R` and `open-call-NAME p50 X p99 Y` (µs); a new connection the broker
/// refused because the previous ones were not yet seen closed (over the app's connections) is tried again and
/// counted in R, not timed.
func connections(brokers: [(name: String, socket: String)], count: Int) {
    let call = VarlinkCall(Broker1.AcquireTokenSilent.self, .init(scopes: scopes))
    do {
        let open = try brokers.map { try VarlinkConnection(unixSocketPath: $0.socket) }
        var first = brokers.map { Samples("connect-first-\($0.name)", capacity: count) }
        var kept = brokers.map { Samples("open-call-\($0.name)", capacity: count) }
        var retries = Array(repeating: 0, count: brokers.count)
        for round in 0..<(min(100, count) + count) {
            for index in brokers.indices {
                var elapsed: UInt64 = 0
                while true {
                    let start = now()
                    let connection = try VarlinkConnection(unixSocketPath: brokers[index].socket)
                    let reply = try connection.call(call)
                    connection.close()
                    elapsed = now() - start
                    if reply.error == nil { break }
                    guard reply.error?.hasSuffix(".TooManyConnections") == true else {
                        fail("connections: \(brokers[index].name): \(reply.error ?? "")")
                    }
                    retries[index] += 1
                    usleep(1000)
                }
                let start = now()
                let reply = try open[index].call(call)
                let keptElapsed = now() - start
                guard reply.error == nil else { fail("connections: \(brokers[index].name): \(reply.error ?? "")") }
                guard round >= min(100, count) else { continue }
                first[index].append(elapsed)
                kept[index].append(keptElapsed)
            }
        }
        for index in brokers.indices {
            first[index].print("retries \(retries[index])")
            kept[index].print()
        }
    } catch {
        fail("connections: \(error)")
    }
}
