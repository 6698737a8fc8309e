/// A JSON value as varlink carries it in `parameters`: the one value type of the codec, so that a
/// message can be decoded, checked and re-encoded without Foundation's untyped `Any`.
public enum VarlinkValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// An integer that fits in 64 bits (varlink's `int`).
    case int(Int64)
    /// Any other number (varlink's `float`).
    case double(Double)
    case string(String)
    case array([VarlinkValue])
    case object([String: VarlinkValue])

    /// The object's fields, `nil` for any other value.
    public var object: [String: VarlinkValue]? {
        if case .object(let fields) = self { fields } else { nil }
    }

    /// The string, `nil` for any other value.
    public var string: String? {
        if case .string(let text) = self { text } else { nil }
    }

    /// The elements, `nil` for any other value.
    public var array: [VarlinkValue]? {
        if case .array(let elements) = self { elements } else { nil }
    }

    /// The number (an integer too), `nil` for any other value.
    public var double: Double? {
        switch self {
        case .double(let value): value
        case .int(let value): Double(value)
        default: nil
        }
    }

    /// The boolean, `nil` for any other value.
    public var bool: Bool? {
        if case .bool(let flag) = self { flag } else { nil }
    }

    /// The integer, `nil` for any other value (a float with no fraction counts: JSON does not tell them apart).
    public var int: Int64? {
        switch self {
        case .int(let value): value
        case .double(let value) where value.rounded() == value && abs(value) < 9.0e18: Int64(value)
        default: nil
        }
    }

    /// The varlink type name of the value, for error messages (`string`, `object`, …).
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "bool"
        case .int: "int"
        case .double: "float"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

extension VarlinkValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let integer = try? container.decode(Int64.self) {
            self = .int(integer)
        } else if let number = try? container.decode(Double.self) {
            self = .double(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let elements = try? container.decode([VarlinkValue].self) {
            self = .array(elements)
        } else {
            self = .object(try container.decode([String: VarlinkValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let flag): try container.encode(flag)
        case .int(let integer): try container.encode(integer)
        case .double(let number): try container.encode(number)
        case .string(let text): try container.encode(text)
        case .array(let elements): try container.encode(elements)
        case .object(let fields): try container.encode(fields)
        }
    }
}
