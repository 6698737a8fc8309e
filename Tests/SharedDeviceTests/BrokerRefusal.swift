import BrokerContract
import DeviceBroker
import Testing
import Varlink

/// A broker call's refusal, decoded through the contract: the interface's errors (AccountError,
/// KeychainError, …) as the generated structs, the varlink service's own (InvalidParameter, …) by name.
/// The broker suites read refusals through it; only the conformance and attack suites read the wire.
struct BrokerRefusal: Error, CustomStringConvertible {
    /// The error reply the caller gets.
    let reply: VarlinkReply
    /// The interface's error, decoded; nil for an `org.varlink.service` error.
    let error: Broker1.ErrorReply?

    /// The refusal `failure` carries.
    /// - Throws: `VarlinkFieldError` when an interface error's parameters do not match the contract.
    init(_ failure: BrokerFailure) throws {
        reply = failure.reply
        error = try Broker1.ErrorReply(failure.reply)
    }

    /// The error's qualified name.
    var name: String? { reply.error }

    /// The AccountError, when it is one.
    var accountError: Broker1.AccountError? {
        if case .accountError(let error)? = error { error } else { nil }
    }

    /// The KeychainError, when it is one.
    var keychainError: Broker1.KeychainError? {
        if case .keychainError(let error)? = error { error } else { nil }
    }

    /// The parameter an `org.varlink.service.InvalidParameter` names; nil for any other error.
    var invalidParameter: String? {
        reply.error == VarlinkReply.invalidParameter("").error ? reply.parameters["parameter"]?.string : nil
    }

    var description: String { "\(reply)" }
}

/// The refusal of the typed broker call `call`: nil, with an issue recorded, when the broker answers it.
func refusal<Answer>(
    sourceLocation: SourceLocation = #_sourceLocation,
    of call: () async throws(BrokerFailure) -> Answer
)
    async throws -> BrokerRefusal?
{
    do throws(BrokerFailure) {
        let answer = try await call()
        Issue.record("the broker answered instead of refusing: \(answer)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return try BrokerRefusal(error)
    }
}
