// The libFuzzer target for the varlink codec: the bytes any local user can send to deviced.
// Built by tools/fuzz together with Sources/Varlink as one module (so internal API is reachable);
// SwiftPM never sees this directory. libFuzzer supplies `main`, hence -parse-as-library and no main.swift.
//
// Input layout: byte 0 chooses how the rest (the stream) is cut into chunks; bytes 1... are the stream.
//   byte 0 & 3 == 0: the stream in one chunk; 1: chunks of 1–8 bytes; 2: 1–64; 3: 1–1024,
//   the sizes drawn from a generator seeded with byte 0 (so seeds start with a printable @, A, B or C).
//
// Properties checked (a failure traps with a message naming it, which libFuzzer reports as a crash):
//   - framing matches a model (the stream split at each NUL): messages come out in order, byte for byte,
//     whatever the chunking; `messageTooLarge` is thrown exactly when a piece longer than the cap comes
//     (the decoder is not fed after it); no message exceeds the cap; `bufferedByteCount` stays within
//     cap + the chunk just appended, and within the cap once `nextMessage()` returned nil;
//   - each message is decoded as a call and as a reply; a decoded one is re-encoded, the encoding ends with
//     its only NUL, and decoding it (NUL dropped) gives an equal value (a round trip);
//   - decoding throws only malformedJSON, notAnObject or invalidField;
//   - the server's queue bound (`VarlinkQueueBudget`, at most `fuzzQueueCalls` calls and `fuzzQueueBytes`
//     bytes) matches a model of a connection whose calls are served in order: a call finishes at once
//     unless a `more` call (a subscription that never ends) is ahead of it, so everything pipelined behind
//     a subscription stays queued; the budget refuses exactly when the model goes over a bound, never
//     holds more than its bytes, and the connection takes nothing after a refusal.

import Foundation

/// The message cap of the fuzzed decoder: small, so that the 8 KiB inputs reach it.
let fuzzMaximumMessageBytes = 4096
/// The queue bounds of the fuzzed connection: small, so that pipelined calls in 8 KiB reach them.
let fuzzQueueCalls = 8
let fuzzQueueBytes = 2048

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    guard count > 0 else { return 0 }
    let input = UnsafeRawBufferPointer(start: start, count: count)
    let header = input[0]
    let stream = Array(input[1...])
    fuzzFraming(stream, chunkSizes: ChunkSizes(header: header))
    return 0
}

/// Stops the fuzzer with `message` when `condition` fails (fatalError keeps its message under -O,
/// unlike precondition).
@inline(__always)
func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { fatalError("varlink fuzz property failed: \(message())") }
}

/// Chunk sizes for a stream, drawn deterministically from the header byte.
struct ChunkSizes {
    private var state: UInt64
    private let largest: Int

    init(header: UInt8) {
        state = 0x9E37_79B9_7F4A_7C15 &* (UInt64(header) &+ 1)
        largest = [Int.max, 8, 64, 1024][Int(header & 3)]
    }

    /// The next chunk size, at least 1.
    mutating func next() -> Int {
        guard largest != .max else { return .max }
        // splitmix64
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Int(z % UInt64(largest)) + 1
    }
}

func fuzzFraming(_ stream: [UInt8], chunkSizes: ChunkSizes) {
    let cap = fuzzMaximumMessageBytes
    // The model: the NUL-terminated pieces of the stream, and the unterminated tail.
    var pieces = stream.split(separator: 0, omittingEmptySubsequences: false).map { Array($0) }
    let tail = pieces.removeLast()
    // The decoder must hand out every piece up to the first one over the cap, then throw.
    let firstTooLarge = pieces.firstIndex { $0.count > cap }
    let expectedMessages = firstTooLarge.map { Array(pieces[..<$0]) } ?? pieces
    let expectTooLarge = firstTooLarge != nil || tail.count > cap

    var decoder = VarlinkFrameDecoder(maximumMessageBytes: cap)
    var queue = QueueModel()
    var sizes = chunkSizes
    var offset = 0
    var received = 0
    var threw = false
    feeding: while offset < stream.count {
        let size = min(sizes.next(), stream.count - offset)
        decoder.append(stream[offset..<offset + size])
        offset += size
        require(
            decoder.bufferedByteCount <= cap + size,
            "bufferedByteCount \(decoder.bufferedByteCount) > cap \(cap) + chunk \(size)"
        )
        while true {
            let message: Data?
            do {
                message = try decoder.nextMessage()
            } catch {
                require(error.code == .messageTooLarge, "nextMessage threw \(error.code), not messageTooLarge")
                threw = true
                break feeding  // The connection is over: feed this decoder nothing more.
            }
            guard let message else {
                require(
                    decoder.bufferedByteCount <= cap,
                    "bufferedByteCount \(decoder.bufferedByteCount) > cap \(cap) after nextMessage returned nil"
                )
                break
            }
            require(message.count <= cap, "a message of \(message.count) bytes passed the cap \(cap)")
            require(
                received < expectedMessages.count,
                "message #\(received) handed out, the model has only \(expectedMessages.count) before the end or an oversized one"
            )
            require(
                Array(message) == expectedMessages[received],
                "message #\(received) (\(message.count) bytes) differs from the model's piece (\(expectedMessages[received].count) bytes)"
            )
            received += 1
            fuzzMessage(message)
            if let call = try? VarlinkCall.decode(message) { queue.receive(call, byteCount: message.count) }
        }
    }
    require(threw == expectTooLarge, "messageTooLarge thrown: \(threw), expected: \(expectTooLarge)")
    require(
        received == expectedMessages.count,
        "\(received) messages handed out, the model has \(expectedMessages.count)"
    )
    if !threw {
        require(
            decoder.bufferedByteCount == tail.count,
            "\(decoder.bufferedByteCount) bytes left buffered, the unterminated tail has \(tail.count)"
        )
    }
}

func fuzzMessage(_ message: Data) {
    do {
        let call = try VarlinkCall.decode(message)
        let encoded = call.encoded()
        requireFramed(encoded, "call")
        do {
            let again = try VarlinkCall.decode(encoded.dropLast())
            require(again == call, "call round trip: \(call) re-encoded as \(describe(encoded)) decodes as \(again)")
        } catch {
            fatalError(
                "varlink fuzz property failed: call round trip: \(call) re-encoded as \(describe(encoded)) does not decode: \(error)"
            )
        }
    } catch {
        requireDecodeError(error, "VarlinkCall.decode")
    }
    do {
        let reply = try VarlinkReply.decode(message)
        let encoded = reply.encoded()
        requireFramed(encoded, "reply")
        do {
            let again = try VarlinkReply.decode(encoded.dropLast())
            require(again == reply, "reply round trip: \(reply) re-encoded as \(describe(encoded)) decodes as \(again)")
        } catch {
            fatalError(
                "varlink fuzz property failed: reply round trip: \(reply) re-encoded as \(describe(encoded)) does not decode: \(error)"
            )
        }
    } catch {
        requireDecodeError(error, "VarlinkReply.decode")
    }
}

/// An encoded message is JSON and one NUL, its last byte (a NUL inside would break the framing).
func requireFramed(_ encoded: Data, _ what: String) {
    require(encoded.last == 0, "an encoded \(what) does not end with NUL: \(describe(encoded))")
    require(
        encoded.dropLast().firstIndex(of: 0) == nil,
        "an encoded \(what) holds a NUL before its end: \(describe(encoded))"
    )
}

func requireDecodeError(_ error: VarlinkProtocolError, _ what: String) {
    require(
        error.code == .malformedJSON || error.code == .notAnObject || error.code == .invalidField,
        "\(what) threw \(error.code)"
    )
}

func describe(_ bytes: Data) -> String {
    String(decoding: bytes.prefix(512), as: UTF8.self).debugDescription
}

/// A connection's queue as the server keeps it (`VarlinkQueueBudget`) beside the model it must match.
struct QueueModel {
    var budget = VarlinkQueueBudget(maximumCalls: fuzzQueueCalls, maximumBytes: fuzzQueueBytes)
    /// Calls (their sizes) waiting behind a subscription, the subscription first.
    var parked: [Int] = []
    var subscribed = false
    var closed = false

    mutating func receive(_ call: VarlinkCall, byteCount: Int) {
        guard !closed else { return }
        let modelCalls = parked.count
        let modelBytes = parked.reduce(0, +)
        let expected: VarlinkQueueBudget.Refusal? =
            modelCalls >= fuzzQueueCalls
            ? .tooManyCalls
            : modelBytes + byteCount > fuzzQueueBytes ? .tooManyBytes : nil
        let refusal = budget.admit(byteCount: byteCount)
        require(
            refusal == expected,
            "queue: admitting \(byteCount) bytes with \(modelCalls) calls of \(modelBytes) bytes queued gave \(String(describing: refusal)), the model \(String(describing: expected))"
        )
        guard refusal == nil else {
            closed = true  // The server closes the connection.
            return
        }
        if subscribed || call.more {
            // Behind a never-ending call (or the call itself): it stays queued.
            parked.append(byteCount)
            subscribed = subscribed || call.more
        } else {
            budget.finish(byteCount: byteCount)  // Served at once.
        }
        require(
            budget.calls == parked.count && budget.bytes == parked.reduce(0, +),
            "queue: the budget holds \(budget.calls) calls of \(budget.bytes) bytes, the model \(parked.count) of \(parked.reduce(0, +))"
        )
        require(
            budget.bytes <= fuzzQueueBytes && budget.calls <= fuzzQueueCalls,
            "queue: the budget went over its bounds"
        )
    }
}
