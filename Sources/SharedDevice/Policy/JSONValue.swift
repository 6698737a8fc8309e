import Foundation

/// A parsed JSON document that keeps booleans, numbers and strings apart, so strict policy decoding
/// can say exactly what is wrong where.
enum JSONValue: Decodable, Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// What a person calls this kind of value in an error message.
    var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A location in a JSON document, printed the way people write it: `apps[1].accessGroups[0]`.
struct JSONPath: CustomStringConvertible, Equatable {
    private var components: [String] = []

    static let root = JSONPath()

    func key(_ name: String) -> JSONPath {
        var copy = self
        copy.components.append(components.isEmpty ? name : ".\(name)")
        return copy
    }

    func index(_ position: Int) -> JSONPath {
        var copy = self
        copy.components.append("[\(position)]")
        return copy
    }

    var description: String { components.isEmpty ? "(document)" : components.joined() }
}
