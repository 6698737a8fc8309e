public import Foundation

/// A reply: `{"parameters": {…}, "continues": true}` or an error `{"error": "iface.Name", "parameters": {…}}`.
public struct VarlinkReply: Sendable, Hashable {
    /// The reply's parameters (or the error's).
    public var parameters: [String: VarlinkValue]
    /// More replies follow (only to a call with `more`).
    public var continues: Bool
    /// The qualified error name, `nil` for a successful reply.
    public var error: String?

    /// A successful reply.
    public init(parameters: [String: VarlinkValue] = [:], continues: Bool = false) {
        self.parameters = parameters
        self.continues = continues
        error = nil
    }

    /// An error reply named `error` (e.g. `org.varlink.service.InvalidParameter`) with its parameters.
    public init(error: String, parameters: [String: VarlinkValue] = [:]) {
        self.parameters = parameters
        continues = false
        self.error = error
    }

    /// The reply as it is sent: JSON and the terminating NUL.
    public func encoded() -> Data {
        // The envelope written as it is (its keys in sorted order: continues, error, parameters), with no object
        // built around the parameters.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(512)
        bytes.append(UInt8(ascii: "{"))
        if continues { bytes.append(contentsOf: #""continues":true,"#.utf8) }
        if let error {
            bytes.append(contentsOf: #""error":"#.utf8)
            VarlinkJSONWriter.write(.string(error), into: &bytes)
            bytes.append(UInt8(ascii: ","))
        }
        bytes.append(contentsOf: #""parameters":"#.utf8)
        VarlinkJSONWriter.write(.object(parameters), into: &bytes)
        bytes.append(contentsOf: [UInt8(ascii: "}"), 0])
        return Data(bytes)
    }

    /// Decodes one reply message (a client's side).
    /// - Throws: `malformedJSON`, `notAnObject`, `invalidField`.
    public static func decode(_ message: Data) throws(VarlinkProtocolError) -> VarlinkReply {
        let fields = try VarlinkMessage.object(message)
        var reply = VarlinkReply()
        switch fields["parameters"] {
        case nil, .null?: break
        case .object(let parameters)?: reply.parameters = parameters
        case let other?:
            throw VarlinkProtocolError(.invalidField, "\"parameters\" must be an object, not \(other.typeName)")
        }
        reply.continues = try VarlinkMessage.flag("continues", in: fields)
        switch fields["error"] {
        case nil, .null?: break
        case .string(let name)?: reply.error = name
        case let other?: throw VarlinkProtocolError(.invalidField, "\"error\" must be a string, not \(other.typeName)")
        }
        return reply
    }

    // MARK: - The standard errors of org.varlink.service

    /// `org.varlink.service.InterfaceNotFound {interface}`.
    public static func interfaceNotFound(_ interface: String) -> VarlinkReply {
        VarlinkReply(error: "org.varlink.service.InterfaceNotFound", parameters: ["interface": .string(interface)])
    }

    /// `org.varlink.service.MethodNotFound {method}`.
    public static func methodNotFound(_ method: String) -> VarlinkReply {
        VarlinkReply(error: "org.varlink.service.MethodNotFound", parameters: ["method": .string(method)])
    }

    /// `org.varlink.service.MethodNotImplemented {method}`.
    public static func methodNotImplemented(_ method: String) -> VarlinkReply {
        VarlinkReply(error: "org.varlink.service.MethodNotImplemented", parameters: ["method": .string(method)])
    }

    /// `org.varlink.service.InvalidParameter {parameter}`: the named parameter is missing or has the wrong type.
    public static func invalidParameter(_ parameter: String) -> VarlinkReply {
        VarlinkReply(error: "org.varlink.service.InvalidParameter", parameters: ["parameter": .string(parameter)])
    }

    /// `org.varlink.service.PermissionDenied`.
    public static let permissionDenied = VarlinkReply(error: "org.varlink.service.PermissionDenied")

    /// `org.varlink.service.ExpectedMore`: the method streams replies and the call did not set `more`.
    public static let expectedMore = VarlinkReply(error: "org.varlink.service.ExpectedMore")
}
