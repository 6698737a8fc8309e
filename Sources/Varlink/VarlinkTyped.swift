/// A struct of a varlink interface (a `type`, or a method's parameters or reply) with its decode and
/// encode written out: contract modules generated from a `.varlink` file conform, so no reflection runs
/// on the hot path.
public protocol VarlinkStruct: Sendable {
    /// Decodes the fields of an object; `path` names the object in errors (`""` for a message's top level).
    /// - Throws: `VarlinkFieldError` naming the first field that is missing or has the wrong type.
    init(varlinkFields fields: [String: VarlinkValue], path: String) throws(VarlinkFieldError)

    /// The fields to send. An optional field left `nil` is `null`, or left out with `omittingAbsent`
    /// (varlink allows either; the replies of a `more` call leave them out).
    func varlinkFields(omittingAbsent: Bool) -> [String: VarlinkValue]

    /// The path (as `VarlinkFieldError` names fields) of the first enum value inside that the interface does
    /// not declare (decoded as `unknown`), nil when there is none. A server refuses a call's parameters
    /// holding one; a client keeps such values in replies.
    func firstUndeclaredEnumValue(path: String) -> String?
}

extension VarlinkStruct {
    /// The fields to send, an optional field left `nil` written as `null`.
    public var varlinkFields: [String: VarlinkValue] { varlinkFields(omittingAbsent: false) }

    /// None: a struct that holds no enum values.
    public func firstUndeclaredEnumValue(path: String) -> String? { nil }

    /// Decodes the parameters of a call or a reply (the top level: errors name the field alone).
    public init(varlinkFields fields: [String: VarlinkValue]) throws(VarlinkFieldError) {
        try self.init(varlinkFields: fields, path: "")
    }
}

/// A method of a varlink interface: its qualified name and the types of its parameters and reply.
public protocol VarlinkMethod {
    /// What the call carries.
    associatedtype Parameters: VarlinkStruct
    /// What each reply carries.
    associatedtype Reply: VarlinkStruct
    /// `interface.Method`.
    static var qualifiedName: String { get }
}

/// An error of a varlink interface, with its parameters.
public protocol VarlinkInterfaceError: VarlinkStruct, Error {
    /// `interface.Error`.
    static var qualifiedName: String { get }
}

extension VarlinkInterfaceError {
    /// The error reply that carries it (optional fields left `nil` are left out).
    public var reply: VarlinkReply {
        VarlinkReply(error: Self.qualifiedName, parameters: varlinkFields(omittingAbsent: true))
    }
}

/// A field of a varlink message that is missing or has the wrong type: the peer receives (server) or
/// reports (client) `org.varlink.service.InvalidParameter` naming it.
public struct VarlinkFieldError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The field's path: `scopes`, or `result.account.homeAccountId` inside nested objects.
    public let field: String

    /// The error for `field`.
    public init(field: String) { self.field = field }

    /// `org.varlink.service.InvalidParameter {parameter}` naming the field.
    public var reply: VarlinkReply { .invalidParameter(field) }

    public var description: String { "the varlink field \(field) is missing or has the wrong type" }
}

/// A call a contract's method enum cannot decode: the error reply a server sends for it.
public enum VarlinkCallDecodingError: Error, Sendable, Hashable {
    /// The interface has no such method: `org.varlink.service.MethodNotFound`.
    case methodNotFound(String)
    /// A parameter is missing or has the wrong type: `org.varlink.service.InvalidParameter` naming it.
    case invalidParameter(VarlinkFieldError)

    /// The error reply.
    public var reply: VarlinkReply {
        switch self {
        case .methodNotFound(let method): .methodNotFound(method)
        case .invalidParameter(let error): error.reply
        }
    }
}

/// The field decoders and encoders generated contract code calls: one per varlink type shape, each
/// naming the field in its error.
public enum VarlinkField {
    @inline(__always)
    static func name(_ path: String, _ name: String) -> String { path.isEmpty ? name : "\(path).\(name)" }

    /// The path of field `key` of the object at `path` (`key` at the top level, else `path.key`).
    public static func path(_ path: String, _ key: String) -> String { name(path, key) }

    // MARK: Decoding a required field

    /// A `string`.
    public static func string(
        _ fields: [String: VarlinkValue],
        _ key: String,
        _ path: String
    ) throws(VarlinkFieldError) -> String {
        guard case .string(let text)? = fields[key] else { throw VarlinkFieldError(field: name(path, key)) }
        return text
    }

    /// An `int` (a float with no fraction counts: JSON does not tell them apart).
    public static func int(
        _ fields: [String: VarlinkValue],
        _ key: String,
        _ path: String
    ) throws(VarlinkFieldError) -> Int {
        guard let value = fields[key]?.int, let integer = Int(exactly: value) else {
            throw VarlinkFieldError(field: name(path, key))
        }
        return integer
    }

    /// A `float` (an integer counts).
    public static func float(
        _ fields: [String: VarlinkValue],
        _ key: String,
        _ path: String
    ) throws(VarlinkFieldError) -> Double {
        guard let value = fields[key]?.double else { throw VarlinkFieldError(field: name(path, key)) }
        return value
    }

    /// A `bool`.
    public static func bool(
        _ fields: [String: VarlinkValue],
        _ key: String,
        _ path: String
    ) throws(VarlinkFieldError) -> Bool {
        guard case .bool(let flag)? = fields[key] else { throw VarlinkFieldError(field: name(path, key)) }
        return flag
    }

    /// An `object` (any JSON value but null).
    public static func object(
        _ fields: [String: VarlinkValue],
        _ key: String,
        _ path: String
    ) throws(VarlinkFieldError) -> VarlinkValue {
        guard let value = fields[key], value != .null else { throw VarlinkFieldError(field: name(path, key)) }
        return value
    }

    /// A struct of the interface.
    public static func `struct`<T: VarlinkStruct>(
        _ fields: [String: VarlinkValue],
        _ key: String,
        _ path: String,
        as type: T.Type = T.self
    ) throws(VarlinkFieldError) -> T {
        guard case .object(let nested)? = fields[key] else { throw VarlinkFieldError(field: name(path, key)) }
        return try T(varlinkFields: nested, path: name(path, key))
    }

    /// An array, each element decoded by `element` (which gets the element's value and path).
    public static func array<T>(
        _ fields: [String: VarlinkValue],
        _ key: String,
        _ path: String,
        _ element: (VarlinkValue, String) throws(VarlinkFieldError) -> T
    ) throws(VarlinkFieldError) -> [T] {
        guard case .array(let values)? = fields[key] else { throw VarlinkFieldError(field: name(path, key)) }
        var elements: [T] = []
        elements.reserveCapacity(values.count)
        let elementPath = name(path, key)
        for value in values { elements.append(try element(value, elementPath)) }
        return elements
    }

    /// A map (`[string]T`), each value decoded by `element`.
    public static func map<T>(
        _ fields: [String: VarlinkValue],
        _ key: String,
        _ path: String,
        _ element: (VarlinkValue, String) throws(VarlinkFieldError) -> T
    ) throws(VarlinkFieldError) -> [String: T] {
        guard case .object(let values)? = fields[key] else { throw VarlinkFieldError(field: name(path, key)) }
        var map: [String: T] = [:]
        map.reserveCapacity(values.count)
        let elementPath = name(path, key)
        for (entry, value) in values { map[entry] = try element(value, elementPath) }
        return map
    }

    /// A value of an enum `type`: any string, one the interface does not declare becoming `unknown`, so a
    /// newer peer's values are understood (`parameters(of:)` refuses them in a call).
    public static func enumeration<T: VarlinkEnum>(
        _ fields: [String: VarlinkValue],
        _ key: String,
        _ path: String,
        as type: T.Type = T.self
    ) throws(VarlinkFieldError) -> T {
        guard case .string(let text)? = fields[key] else { throw VarlinkFieldError(field: name(path, key)) }
        return T(rawValue: text)
    }

    /// Whether an optional field is absent (missing or `null`).
    @inline(__always)
    public static func isAbsent(_ fields: [String: VarlinkValue], _ key: String) -> Bool {
        switch fields[key] {
        case nil, .null?: true
        default: false
        }
    }

    // MARK: Decoding an element of an array or a map

    /// A `string` element.
    public static func string(_ value: VarlinkValue, _ path: String) throws(VarlinkFieldError) -> String {
        guard case .string(let text) = value else { throw VarlinkFieldError(field: path) }
        return text
    }

    /// An `int` element.
    public static func int(_ value: VarlinkValue, _ path: String) throws(VarlinkFieldError) -> Int {
        guard let number = value.int, let integer = Int(exactly: number) else { throw VarlinkFieldError(field: path) }
        return integer
    }

    /// A `float` element.
    public static func float(_ value: VarlinkValue, _ path: String) throws(VarlinkFieldError) -> Double {
        guard let number = value.double else { throw VarlinkFieldError(field: path) }
        return number
    }

    /// A `bool` element.
    public static func bool(_ value: VarlinkValue, _ path: String) throws(VarlinkFieldError) -> Bool {
        guard case .bool(let flag) = value else { throw VarlinkFieldError(field: path) }
        return flag
    }

    /// An `object` element.
    public static func object(_ value: VarlinkValue, _ path: String) throws(VarlinkFieldError) -> VarlinkValue {
        guard value != .null else { throw VarlinkFieldError(field: path) }
        return value
    }

    /// An enum element (any string: see `enumeration(_:_:_:as:)`).
    public static func enumeration<T: VarlinkEnum>(
        _ value: VarlinkValue,
        _ path: String,
        as type: T.Type = T.self
    ) throws(VarlinkFieldError) -> T {
        guard case .string(let text) = value else { throw VarlinkFieldError(field: path) }
        return T(rawValue: text)
    }

    /// An array element (arrays of arrays).
    public static func array<T>(
        _ value: VarlinkValue,
        _ path: String,
        _ element: (VarlinkValue, String) throws(VarlinkFieldError) -> T
    ) throws(VarlinkFieldError) -> [T] {
        guard case .array(let values) = value else { throw VarlinkFieldError(field: path) }
        var elements: [T] = []
        for value in values { elements.append(try element(value, path)) }
        return elements
    }

    /// A map element.
    public static func map<T>(
        _ value: VarlinkValue,
        _ path: String,
        _ element: (VarlinkValue, String) throws(VarlinkFieldError) -> T
    ) throws(VarlinkFieldError) -> [String: T] {
        guard case .object(let values) = value else { throw VarlinkFieldError(field: path) }
        var map: [String: T] = [:]
        for (entry, value) in values { map[entry] = try element(value, path) }
        return map
    }

    /// The parameters of `call` as `T` (a method's `Parameters`).
    /// - Throws: `.invalidParameter` naming the first field that is missing or has the wrong type, or that
    ///   holds an enum value the interface does not declare (a server cannot act on it).
    public static func parameters<T: VarlinkStruct>(
        of call: VarlinkCall,
        as type: T.Type = T.self
    ) throws(VarlinkCallDecodingError) -> T {
        let parameters: T
        do {
            parameters = try T(varlinkFields: call.parameters, path: "")
        } catch {
            throw .invalidParameter(error)
        }
        if let field = parameters.firstUndeclaredEnumValue(path: "") {
            throw .invalidParameter(VarlinkFieldError(field: field))
        }
        return parameters
    }

    /// A struct element.
    public static func `struct`<T: VarlinkStruct>(
        _ value: VarlinkValue,
        _ path: String,
        as type: T.Type = T.self
    ) throws(VarlinkFieldError) -> T {
        guard case .object(let nested) = value else { throw VarlinkFieldError(field: path) }
        return try T(varlinkFields: nested, path: path)
    }
}

extension VarlinkReply {
    /// A successful reply carrying `reply`; `omittingAbsent` leaves out its optional fields that are `nil`.
    public init(_ reply: some VarlinkStruct, continues: Bool = false, omittingAbsent: Bool = false) {
        self.init(parameters: reply.varlinkFields(omittingAbsent: omittingAbsent), continues: continues)
    }
}

extension VarlinkCall {
    /// A call of `method` carrying `parameters`; optional parameters that are `nil` are left out.
    public init<Method: VarlinkMethod>(_ method: Method.Type, _ parameters: Method.Parameters, more: Bool = false) {
        self.init(method: Method.qualifiedName, parameters: parameters.varlinkFields(omittingAbsent: true), more: more)
    }
}
