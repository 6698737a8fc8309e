/// Bytes from a peer that are not a varlink message. The connection cannot go on after one (varlink has no
/// way to say which call a reply answers once the framing is lost), so a server answers nothing and
/// closes it; the message says what was wrong without echoing the peer's bytes.
public struct VarlinkProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong, matchable in `catch` (`catch VarlinkProtocolError.Code.messageTooLarge`).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Kind: Hashable, Sendable { case messageTooLarge, malformedJSON, notAnObject, invalidField, tooManyValues }
        let kind: Kind

        /// A message longer than the decoder's limit (no NUL within it).
        public static let messageTooLarge = Code(kind: .messageTooLarge)
        /// Not valid UTF-8 JSON.
        public static let malformedJSON = Code(kind: .malformedJSON)
        /// Valid JSON that decodes into more values than the decoder's limit (its tree would cost far more
        /// than its bytes).
        public static let tooManyValues = Code(kind: .tooManyValues)
        /// Valid JSON, but not an object.
        public static let notAnObject = Code(kind: .notAnObject)
        /// A field of the call with the wrong type or form (`method` missing or unqualified, `more` not a bool, …).
        public static let invalidField = Code(kind: .invalidField)

        /// Lets `catch VarlinkProtocolError.Code.messageTooLarge { … }` match.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? VarlinkProtocolError)?.code == code
        }

        public var description: String {
            switch kind {
            case .messageTooLarge: "message too large"
            case .malformedJSON: "malformed JSON"
            case .notAnObject: "not an object"
            case .invalidField: "invalid field"
            case .tooManyValues: "too many values"
            }
        }
    }

    /// The failure class.
    public let code: Code
    /// What was wrong; never the peer's bytes.
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// More than `maximumBytes` arrived without the NUL that ends a message: every framing decoder (this
    /// module's and the NIO one's) refuses with this same error.
    public static func messageTooLarge(maximumBytes: Int) -> VarlinkProtocolError {
        VarlinkProtocolError(
            .messageTooLarge,
            "a message is longer than \(maximumBytes) bytes (the limit) without its terminating NUL"
        )
    }

    public var description: String { "\(message) (\(code))" }
}
