import IdentityClient
import KeychainStore
import SharedDevice
import Varlink

/// A call the broker refuses, as the varlink error reply it becomes. Every library error keeps the code
/// it has in-process (the keychain's OSStatus, MSAL's status); messages never carry a secret.
struct BrokerFailure: Error {
    let reply: VarlinkReply

    static func invalidParameter(_ name: String) -> BrokerFailure { BrokerFailure(reply: .invalidParameter(name)) }

    static let expectedMore = BrokerFailure(reply: .expectedMore)

    static func methodNotFound(_ method: String) -> BrokerFailure { BrokerFailure(reply: .methodNotFound(method)) }

    /// A limit of the broker or the policy refused the call (`LimitExceeded`): which, its value, what to do.
    static func limitExceeded(_ limit: String, maximum: Int, _ message: String) -> BrokerFailure {
        BrokerFailure(reply: VarlinkReply(error: BrokerInterface.error("LimitExceeded"), parameters: [
            "limit": .string(limit), "maximum": .int(Int64(maximum)), "message": .string(message),
        ]))
    }

    /// The caller's uid is not an app of the policy.
    static func callerNotInPolicy(_ caller: BrokerCaller, provisioned: Bool) -> BrokerFailure {
        let message = provisioned
            ? "uid \(caller.uid) is not an app in the device policy, so it has no access on this device; list the app with its \"uid\" (or \"user\") and run `devicectl provision` again"
            : "the device is not provisioned, so no app has access yet; run `devicectl provision --policy FILE` first"
        return BrokerFailure(reply: VarlinkReply(error: BrokerInterface.error("CallerNotInPolicy"),
                                                 parameters: ["uid": .int(Int64(caller.uid)), "message": .string(message)]))
    }

    init(reply: VarlinkReply) { self.reply = reply }

    /// An answer from the keychain or the account manager to an app the policy lists (not a refusal of the caller).
    var isAnswerToApp: Bool {
        reply.error == BrokerInterface.error("KeychainError") || reply.error == BrokerInterface.error("AccountError")
    }

    init(_ error: KeychainError) {
        self.init(reply: VarlinkReply(error: BrokerInterface.error("KeychainError"), parameters: [
            "status": .int(Int64(error.code.osStatus)), "code": .string(error.code.name), "message": .string(error.message),
        ]))
    }

    init(_ error: SharedDeviceError) {
        if let store = error.storeError {
            self.init(store)
            return
        }
        var parameters: [String: VarlinkValue] = ["code": .string(error.code.name), "message": .string(error.message)]
        if let identity = error.identityError {
            parameters["msalStatus"] = .int(Int64(identity.msalErrorCode))
            parameters["identityCode"] = .string(identity.code.rawValue)
        }
        self.init(reply: VarlinkReply(error: BrokerInterface.error("AccountError"), parameters: parameters))
    }
}
