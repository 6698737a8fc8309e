import Foundation
import Varlink

/// A call's parameters with typed accessors; a missing required or mistyped parameter is
/// `org.varlink.service.InvalidParameter` naming it.
struct BrokerParameters {
    let values: [String: VarlinkValue]

    func string(_ name: String) throws(BrokerFailure) -> String {
        guard let value = try optionalString(name) else { throw .invalidParameter(name) }
        return value
    }

    func optionalString(_ name: String) throws(BrokerFailure) -> String? {
        switch values[name] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        default: throw .invalidParameter(name)
        }
    }

    func optionalBool(_ name: String) throws(BrokerFailure) -> Bool? {
        switch values[name] {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        default: throw .invalidParameter(name)
        }
    }

    func optionalInt(_ name: String, in range: ClosedRange<Int64>) throws(BrokerFailure) -> Int64? {
        switch values[name] {
        case nil, .null?: return nil
        case let value?:
            guard let number = value.int, range.contains(number) else { throw .invalidParameter(name) }
            return number
        }
    }

    func strings(_ name: String) throws(BrokerFailure) -> [String] {
        guard case .array(let elements)? = values[name] else { throw .invalidParameter(name) }
        var strings: [String] = []
        for element in elements {
            guard let text = element.string else { throw .invalidParameter(name) }
            strings.append(text)
        }
        return strings
    }

    /// Base64 (standard alphabet) bytes.
    func optionalBytes(_ name: String) throws(BrokerFailure) -> Data? {
        guard let text = try optionalString(name) else { return nil }
        guard let data = Data(base64Encoded: text) else { throw .invalidParameter(name) }
        return data
    }
}
