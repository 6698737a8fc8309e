import BrokerContract
import IdentityClient
import KeychainStore
import ProcessSandbox
import SharedDevice
public import Varlink

/// A call the broker refuses, as the varlink error reply it becomes. Every library error keeps the code
/// it has in-process (the keychain's OSStatus, MSAL's status); messages never carry a secret.
public struct BrokerFailure: VarlinkServiceError {
    /// The error reply the caller gets.
    public let reply: VarlinkReply

    static func invalidParameter(_ name: String) -> BrokerFailure { BrokerFailure(reply: .invalidParameter(name)) }

    static let expectedMore = BrokerFailure(reply: .expectedMore)

    static let permissionDenied = BrokerFailure(reply: .permissionDenied)

    /// A limit of the broker or the policy refused the call (`LimitExceeded`): which, its value, what to do.
    static func limitExceeded(_ limit: Broker1.LimitName, maximum: Int, _ message: String) -> BrokerFailure {
        BrokerFailure(Broker1.LimitExceeded(limit: limit, maximum: maximum, message: message))
    }

    /// The caller's uid is not an app of the policy. Root never is (a policy cannot list uid 0: root is the
    /// device's administrator), so root is told what it can do instead of being told to list itself.
    static func callerNotInPolicy(_ caller: BrokerCaller, provisioned: Bool) -> BrokerFailure {
        let message: String
        switch (caller.uid, provisioned, caller.sandbox) {
        case (0, _, _):
            message = """
                uid 0 (root) is the device's administrator and never an app: no policy may list it, so the broker serves \
                root no app's calls; run the app as its own user (the uid its policy entry names, e.g. setpriv --reuid=UID \
                --regid=GID --init-groups APP), or act for an app as the administrator with devicectl and --app ID, which \
                works on the store directly
                """
        case (_, false, _):
            message =
                "the device is not provisioned, so no app has access yet; run `devicectl provision --policy FILE` first"
        case (let uid, true, .flatpak(let app)):
            message =
                "Flatpak app \(app.appID) of uid \(uid) is not an app in the device policy, so it has no access on this device; list it with \"flatpak\": \"\(app.appID)\" and \"uid\": \(uid) and run `devicectl provision` again"
        case (let uid, true, .unidentified(reason: let reason)):
            message =
                "the broker could not tell which app of uid \(uid) is calling (\(reason)), so it serves it as no app; connect again from the app's own process (a process that hands its connection on and exits loses its identity), and check that deviced may read /proc/PID/root (CAP_SYS_PTRACE)"
        case (let uid, true, .host), (let uid, true, .unpinned):
            message =
                "uid \(uid) is not an app in the device policy, so it has no access on this device; list the app with its \"uid\" (or \"user\") and run `devicectl provision` again"
        }
        return BrokerFailure(
            Broker1.CallerNotInPolicy(uid: Int(caller.uid), message: message, flatpakAppId: caller.sandbox.flatpakAppID)
        )
    }

    /// The failure that sends `reply`.
    public init(reply: VarlinkReply) { self.reply = reply }

    /// The interface's error `error`.
    init(_ error: some VarlinkInterfaceError) { reply = error.reply }

    /// An answer from the keychain or the account manager to an app the policy lists (not a refusal of the caller).
    var isAnswerToApp: Bool {
        reply.error == Broker1.KeychainError.qualifiedName || reply.error == Broker1.AccountError.qualifiedName
    }

    init(_ error: KeychainError) {
        self.init(
            Broker1.KeychainError(status: Int(error.code.osStatus), code: error.code.name, message: error.message)
        )
    }

    init(_ error: SharedDeviceError) {
        if let store = error.storeError {
            self.init(store)
            return
        }
        let identity = error.identityError
        self.init(
            Broker1.AccountError(
                code: error.code.name,
                message: error.message,
                msalStatus: identity.map { Int($0.msalErrorCode) },
                identityCode: identity?.code.rawValue
            )
        )
    }
}
