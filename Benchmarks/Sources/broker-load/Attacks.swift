import BrokerContract
import Foundation
import Varlink

#if canImport(Glibc)
import Glibc
#endif

// Hostile local callers against a running deviced, for the victim's latency under attack (tools/bench broker).
// Each attack is what a hardening test does (Tests/DevicectlTests/BrokerAttackTests*.swift, whose attacker is
// Tests/Python/broker_attacks.py), written again here on raw varlink bytes and kept up until SIGTERM: a
// connection the broker closes is opened again. Each prints `ready` once its attack is in place, and at SIGTERM
// one line `attack KIND key value …` saying what it did and what the broker answered.

/// `{"method": "org.sharedmode.Broker1.METHOD", "parameters": …}` and its NUL, as raw bytes.
func rawCall(_ method: String, parameters: String? = nil, more: Bool = false) -> [UInt8] {
    var text = #"{"method":"org.sharedmode.Broker1.\#(method)""#
    if let parameters { text += #","parameters":\#(parameters)"# }
    if more { text += #","more":true"# }
    return Array((text + "}").utf8) + [0]
}

/// A call small on the wire and large decoded, within the server's bounds: GetDeviceInformation (any caller may
/// ask) with a parameter nested `depth` levels (`[[[…0…]]]`) and one of `wide` objects `{"":0}` (an object and a
/// number each: many small allocations per byte). 1,005 values of the 1,024 a message may decode into, 62 levels
/// deep of 64, about 3.5 KB on the wire.
func decodedAttackCall(depth: Int = 60, wide: Int = 470) -> [UInt8] {
    let deep = String(repeating: "[", count: depth) + "0" + String(repeating: "]", count: depth)
    let objects = Array(repeating: #"{"":0}"#, count: wide).joined(separator: ",")
    return rawCall("GetDeviceInformation", parameters: #"{"deep":\#(deep),"wide":[\#(objects)]}"#)
}

/// The error a reply names and its `scope` or `limit` parameter (`Error/scope`), or nil for a success.
func replyError(_ message: [UInt8]) -> String? {
    let reply: VarlinkReply
    do { reply = try VarlinkReply.decode(Data(message)) } catch { return "unreadable" }
    guard let error = reply.error else { return nil }
    let name = error.split(separator: ".").last.map(String.init) ?? error
    if case .string(let scope)? = reply.parameters["scope"] ?? reply.parameters["limit"] { return "\(name)/\(scope)" }
    return name
}

/// What an attacker saw, printed at the end as `attack KIND key value …`.
struct AttackReport {
    let kind: String
    var counts: [String: Int] = [:]

    mutating func count(_ key: String, _ by: Int = 1) { counts[key, default: 0] += by }

    func print() {
        let fields = counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: " ")
        say("attack \(kind) uid \(getuid()) \(fields)")
    }
}

/// Runs one attack until SIGTERM: `attack KIND SOCKET CONNECTIONS`.
func attack(kind: String, socket: String, connections: Int) -> Never {
    let stop = StopSignal()
    var report = AttackReport(kind: kind)
    switch kind {
    case "flood": flood(socket, attempts: connections, stop, &report)
    case "trickle-huge": trickleHuge(socket, connections: connections, stop, &report)
    case "decoded": decoded(socket, connections: connections, stop, &report)
    case "unread": unread(socket, connections: connections, stop, &report)
    case "held": held(socket, connections: connections, stop, &report)
    default: fail("unknown attack \(kind) (flood, trickle-huge, decoded, unread, held)")
    }
    report.print()
    exit(0)
}

/// Opens a connection, or counts why not (`connect-failed`).
private func connectAttacker(
    _ socket: String,
    _ report: inout AttackReport,
    receiveBuffer: Int32? = nil
) -> RawConnection? {
    do { return try RawConnection(socket, receiveBuffer: receiveBuffer) } catch {
        report.count("connect-failed")
        return nil
    }
}

/// A connection the broker refused at once (over a connection limit) answers with its error right away; one it
/// admitted says nothing. The refusal's error, or nil when admitted.
private func refusal(of connection: RawConnection) -> String? {
    if let message = connection.readMessage(timeout: 100) { return replyError(message) ?? "answered" }
    return connection.peerClosed ? "closed" : nil
}

/// A flood of connections up to the limit (the tests' `flood-connections`): opens connections until the broker
/// refuses one (or `attempts` of them), holds those it admitted and sends one byte a second of a message that
/// never ends on each (so the message deadline closes them); every second, fills up to the limit again.
private func flood(_ socket: String, attempts: Int, _ stop: StopSignal, _ report: inout AttackReport) {
    let prefix = Array(#"{"method":"org.sharedmode.Broker1.GetCaller","parameters":{"p":""#.utf8)
    var held: [(connection: RawConnection, sent: Int)] = []
    var announced = false
    while !stop.isSet {
        for _ in 0..<max(0, attempts - held.count) where !stop.isSet {
            guard let connection = connectAttacker(socket, &report) else { break }
            if let error = refusal(of: connection) {
                report.count("refused:\(error)")
                break
            }
            held.append((connection, 0))
            report.count("admitted")
        }
        report.counts["held-max"] = max(report.counts["held-max"] ?? 0, held.count)
        if !announced {
            say("ready")
            announced = true
        }
        guard stop.sleep(1) else { break }
        var still: [(connection: RawConnection, sent: Int)] = []
        for entry in held {
            let byte = entry.sent < prefix.count ? prefix[entry.sent] : UInt8(ascii: "x")
            if !entry.connection.hungUp, entry.connection.send([byte]) {
                still.append((entry.connection, entry.sent + 1))
            } else {
                report.count("closed-by-broker")
            }
        }
        held = still
    }
}

/// Huge frames trickled slowly: on each connection a call of almost 1 MiB (the largest message the broker takes)
/// sent 32 KiB every 0.2 s, so it completes after about 6.5 s, within the 10 s deadline of a message that
/// started; its reply read, the next one. A connection the broker closes is opened again.
private func trickleHuge(_ socket: String, connections: Int, _ stop: StopSignal, _ report: inout AttackReport) {
    let padding = String(repeating: "x", count: (1 << 20) - 200)
    let message = rawCall("GetDeviceInformation", parameters: #"{"padding":"\#(padding)"}"#)
    let chunk = 32 << 10
    var streams: [(connection: RawConnection, sent: Int)?] = Array(repeating: nil, count: connections)
    var announced = false
    while !stop.isSet {
        for index in streams.indices where !stop.isSet {
            if streams[index] == nil {
                guard let connection = connectAttacker(socket, &report) else { continue }
                streams[index] = (connection, 0)
            }
            guard let (connection, sent) = streams[index] else { continue }
            let end = min(message.count, sent + chunk)
            guard connection.send(message[sent..<end]) else {
                report.count("closed-by-broker")
                streams[index] = nil
                continue
            }
            report.count("bytes-sent", end - sent)
            if end < message.count {
                streams[index] = (connection, end)
            } else if let reply = connection.readMessage(timeout: 30_000) {
                report.count(replyError(reply).map { "error:\($0)" } ?? "answered")
                streams[index] = (connection, 0)
            } else {
                report.count("closed-by-broker")
                streams[index] = nil
            }
        }
        if !announced {
            say("ready")
            announced = true
        }
        guard stop.sleep(0.2) else { break }
    }
}

/// Calls small on the wire but large decoded (`decodedAttackCall`), on each connection one after another as fast
/// as the broker answers.
private func decoded(_ socket: String, connections: Int, _ stop: StopSignal, _ report: inout AttackReport) {
    let message = decodedAttackCall()
    var sockets: [RawConnection?] = Array(repeating: nil, count: connections)
    var announced = false
    while !stop.isSet {
        for index in sockets.indices {
            if sockets[index] == nil { sockets[index] = connectAttacker(socket, &report) }
            guard let connection = sockets[index], connection.send(message) else {
                sockets[index] = nil
                continue
            }
        }
        for index in sockets.indices {
            guard let connection = sockets[index] else { continue }
            if let reply = connection.readMessage(timeout: 30_000) {
                report.count(replyError(reply).map { "error:\($0)" } ?? "answered")
            } else {
                report.count("closed-by-broker")
                sockets[index] = nil
            }
        }
        if !announced {
            say("ready")
            announced = true
        }
        if sockets.allSatisfy({ $0 == nil }) { _ = stop.sleep(0.1) }
    }
}

/// Pipelined calls whose replies are never read (the tests' `unread`): on each connection (a 4 KiB receive
/// buffer) 16 more silent tokens every second, none of their replies read. The broker answers until the socket
/// holds no more of its replies, then stops running the connection's calls; the calls queue up to the 64 a
/// connection may hold (the broker then closes it) or the reply timeout (30 s) closes it; it is opened again.
private func unread(_ socket: String, connections: Int, _ stop: StopSignal, _ report: inout AttackReport) {
    let batch = Array(
        Array(repeating: rawCall("AcquireTokenSilent", parameters: #"{"scopes":["User.Read"]}"#), count: 16).joined()
    )
    var streams: [(connection: RawConnection, left: ArraySlice<UInt8>)?] = Array(repeating: nil, count: connections)
    var announced = false
    while !stop.isSet {
        for index in streams.indices where !stop.isSet {
            if let stream = streams[index], stream.connection.hungUp {
                report.count("closed-by-broker")
                streams[index] = nil
            }
            if streams[index] == nil {
                guard let connection = connectAttacker(socket, &report, receiveBuffer: 4096) else { continue }
                streams[index] = (connection, [])
            }
            guard let (connection, stream) = streams[index] else { continue }
            var left = stream
            // What is left of the last batch, then a new one: as much as the socket takes now.
            if left.isEmpty { left = batch[...] }
            guard let written = connection.sendAvailable(left) else {
                report.count("closed-by-broker")
                streams[index] = nil
                continue
            }
            report.count("bytes-sent", written)
            left = left.dropFirst(written)
            streams[index] = (connection, left)
        }
        if !announced {
            say("ready")
            announced = true
        }
        guard stop.sleep(1) else { break }
    }
}

/// Calls held behind a subscription that never ends (the tests' `pipeline` and `held`): on each connection a
/// SubscribeAccountChanges and three calls of 1 MB behind it (3 MB, within the 4 MiB a connection may queue), kept
/// until SIGTERM; a connection the broker closes is opened again.
private func held(_ socket: String, connections: Int, _ stop: StopSignal, _ report: inout AttackReport) {
    let padding = String(repeating: "x", count: 1_000_000)
    let call = rawCall("GetDeviceInformation", parameters: #"{"padding":"\#(padding)"}"#)
    let subscription = rawCall("SubscribeAccountChanges", more: true)
    var sockets: [RawConnection?] = Array(repeating: nil, count: connections)
    var announced = false
    while !stop.isSet {
        for index in sockets.indices where !stop.isSet {
            if let connection = sockets[index], !connection.hungUp { continue }
            if sockets[index] != nil { report.count("closed-by-broker") }
            sockets[index] = nil
            guard let connection = connectAttacker(socket, &report) else { continue }
            guard connection.send(subscription), connection.send(call), connection.send(call), connection.send(call)
            else {
                report.count("closed-by-broker")
                continue
            }
            report.count("bytes-sent", subscription.count + 3 * call.count)
            sockets[index] = connection
        }
        if !announced {
            say("ready")
            announced = true
        }
        guard stop.sleep(1) else { break }
    }
}
