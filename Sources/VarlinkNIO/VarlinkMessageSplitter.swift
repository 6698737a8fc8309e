public import NIOCore
import Varlink

/// Splits a connection's bytes into varlink messages with `VarlinkFraming`: each message goes on as a
/// `ByteBuffer` (a slice of what was read, without its NUL); a message over `maximumMessageBytes` fails the
/// channel with `VarlinkProtocolError` (`messageTooLarge`). Bytes of a message left unfinished when the
/// peer closes are dropped.
public struct VarlinkMessageSplitter: ByteToMessageDecoder {
    public typealias InboundOut = ByteBuffer

    private var framing: VarlinkFraming

    /// A splitter refusing messages over `maximumMessageBytes`.
    public init(maximumMessageBytes: Int) {
        framing = VarlinkFraming(maximumMessageBytes: maximumMessageBytes)
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let message = try framing.nextMessage(in: &buffer) else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(message))
        return .continue
    }

    public mutating func decodeLast(
        context: ChannelHandlerContext,
        buffer: inout ByteBuffer,
        seenEOF: Bool
    ) throws -> DecodingState {
        try decode(context: context, buffer: &buffer)
    }
}
