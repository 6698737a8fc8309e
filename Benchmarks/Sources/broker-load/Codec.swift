import BrokerContract
import Foundation
import NIOCore
import Varlink
import VarlinkNIO
import VarlinkServer

// The varlink codec of one silent token, alone: the same bytes deviced and its client exchange, through the
// same code, with no socket. A real reply is captured once from the running deviced (its bytes as they came
// off the socket) and reused.

/// `codec SOCKET N` (as an app's uid): captures a real AcquireTokenSilent reply from the broker at SOCKET, then
/// times N rounds of the codec and prints:
///   `codec-messages call BYTES reply BYTES reencoded-identical 0|1`
///   `codec-total p50 … p99 …` and its parts `codec-client-encode`, `codec-server-decode`,
///   `codec-server-encode`, `codec-client-decode` (µs);
///   `bounds-decode-bounded` / `bounds-decode-unbounded` (the call decoded with the server's value limit, and
///   without, interleaved) and `bounds-largest-decoded … bytes B values V` (the largest call the bounds let
///   through, `decodedAttackCall`), µs with 3 decimals.
func codec(socket: String, count: Int) {
    let parameters = Broker1.AcquireTokenSilent.Parameters(scopes: scopes)
    let callWire = Array(VarlinkCall(Broker1.AcquireTokenSilent.self, parameters).encoded())
    let replyMessage: [UInt8]
    do {
        let connection = try RawConnection(socket)
        guard connection.send(callWire), let message = connection.readMessage(timeout: 30_000) else {
            fail("codec: no reply from \(socket)")
        }
        replyMessage = message
    } catch {
        fail("codec: \(error)")
    }
    let replyWire = replyMessage + [0]
    // The reply as the server holds it before it encodes it (`ReplyWriter` encodes this value).
    let serverReply: VarlinkReply
    do { serverReply = try VarlinkReply.decode(Data(replyMessage)) } catch { fail("codec: the reply: \(error)") }
    guard serverReply.error == nil else { fail("codec: the broker refused the call: \(serverReply.error ?? "")") }
    let identical = Array(serverReply.encoded()) == replyWire
    say("codec-messages call \(callWire.count) reply \(replyWire.count) reencoded-identical \(identical ? 1 : 0)")

    // The server's limits, as deviced configures them (VarlinkServerConfiguration's defaults; BrokerServerSetup
    // changes neither).
    let configuration = VarlinkServerConfiguration(errorInterface: "org.sharedmode.Broker1")
    var framing = VarlinkFraming(maximumMessageBytes: configuration.maximumMessageBytes)
    var clientFraming = VarlinkFrameDecoder(maximumMessageBytes: 16 << 20)  // VarlinkConnection's default
    var total = Samples("codec-total", capacity: count)
    var clientEncode = Samples("codec-client-encode", capacity: count)
    var serverDecode = Samples("codec-server-decode", capacity: count)
    var serverEncode = Samples("codec-server-encode", capacity: count)
    var clientDecode = Samples("codec-client-decode", capacity: count)
    var checksum = 0
    let warmUp = min(200, count)
    for round in 0..<(warmUp + count) {
        do {
            // The client encodes the call with the generated contract (what VarlinkConnection.send writes).
            let t0 = now()
            let wire = VarlinkCall(Broker1.AcquireTokenSilent.self, parameters).encoded()
            let t1 = now()
            // The bytes as the server's channel read them (the kernel's copy, untimed).
            var inbound = ByteBuffer(bytes: wire)
            // The server: VarlinkMessageDecoder frames and decodes, counting the values the call holds.
            let t2 = now()
            guard let message = try framing.nextMessage(in: &inbound) else { fail("codec: no message framed") }
            let (call, values) = try VarlinkCall.decodeCounting(
                Data(message.readableBytesView),
                maximumValues: configuration.maximumMessageValues
            )
            let held = message.readableBytes + values * VarlinkServerConfiguration.heldBytesPerValue
            let t3 = now()
            // The server encodes the reply (ReplyWriter: encoded(), into a ByteBuffer for the channel).
            let outbound = ByteBuffer(bytes: serverReply.encoded())
            let t4 = now()
            // The client frames and decodes the reply, then its typed fields (VarlinkConnection.nextReply and
            // the generated contract's Reply).
            clientFraming.append(replyWire)
            guard let replyData = try clientFraming.nextMessage() else { fail("codec: no reply framed") }
            let reply = try VarlinkReply.decode(replyData)
            guard reply.error == nil else { fail("codec: an error reply") }
            let typed = try Broker1.AcquireTokenSilent.Reply(varlinkFields: reply.parameters)
            let t5 = now()
            checksum &+= held &+ call.parameters.count &+ outbound.readableBytes &+ typed.result.accessToken.count
            guard round >= warmUp else { continue }
            clientEncode.append(t1 - t0)
            serverDecode.append(t3 - t2)
            serverEncode.append(t4 - t3)
            clientDecode.append(t5 - t4)
            total.append((t1 - t0) + (t5 - t2))
        } catch {
            fail("codec: \(error)")
        }
    }
    for samples in [total, clientEncode, serverDecode, serverEncode, clientDecode] { samples.print(decimals: 2) }

    // The value limit's own cost: the same call decoded with the server's limit and with none, interleaved.
    let callData = Data(callWire.dropLast())
    var bounded = Samples("bounds-decode-bounded", capacity: count)
    var unbounded = Samples("bounds-decode-unbounded", capacity: count)
    // The largest call the bounds let through (an attacker's: `decodedAttackCall`), decoded as the server does.
    let attackData = Data(decodedAttackCall().dropLast())
    var largest = Samples("bounds-largest-decoded", capacity: count)
    var attackValues = 0
    for round in 0..<(warmUp + count) {
        do {
            let start = now()
            let (first, _) = try VarlinkCall.decodeCounting(callData, maximumValues: configuration.maximumMessageValues)
            let middle = now()
            let (second, _) = try VarlinkCall.decodeCounting(callData, maximumValues: .max)
            let end = now()
            let (attack, values) = try VarlinkCall.decodeCounting(
                attackData,
                maximumValues: configuration.maximumMessageValues
            )
            let attackEnd = now()
            checksum &+= first.parameters.count &+ second.parameters.count &+ attack.parameters.count
            attackValues = values
            guard round >= warmUp else { continue }
            bounded.append(middle - start)
            unbounded.append(end - middle)
            largest.append(attackEnd - end)
        } catch {
            fail("codec: \(error)")
        }
    }
    bounded.print(decimals: 3)
    unbounded.print(decimals: 3)
    largest.print(
        decimals: 3,
        "bytes \(attackData.count) values \(attackValues) limit \(configuration.maximumMessageValues)"
    )
    say("codec-checksum \(checksum)")
}
