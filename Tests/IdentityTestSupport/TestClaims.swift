public import JWTKit

/// A claim value as a provider writes it into an ID token.
public enum ClaimValue: Codable, Sendable, Equatable {
    case string(String)
    case int(Int)
    case bool(Bool)
    case strings([String])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Int.self) {
            self = .int(value)
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else {
            self = .strings(try container.decode([String].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .strings(let value): try container.encode(value)
        }
    }
}

/// Any claim set, for signing test tokens (or re-signing a provider's real ones with changed claims).
/// Checks nothing itself: the code under test does.
public struct TestClaims: JWTPayload {
    public var values: [String: ClaimValue]

    public init(_ values: [String: ClaimValue]) { self.values = values }

    public init(from decoder: any Decoder) throws {
        values = try decoder.singleValueContainer().decode([String: ClaimValue].self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(values)
    }

    public func verify(using algorithm: some JWTAlgorithm) async throws {}
}
