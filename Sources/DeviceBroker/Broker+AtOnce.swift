import BrokerContract
import KeychainStore
import SharedDevice
public import Varlink

// The calls an app makes most (a silent token from the cache, who is signed in, the device's mode) answered at
// once on the thread that read them off the socket: from what the broker holds and at most one read of the store
// (none while nobody committed since the last answer), never a write, the network or a wait. Anything else, and
// any of these that would need more (a refresh, a write, a policy that changed, a refusal to audit), is left to
// `handle`.
extension Broker {
    /// The reply to `call` from `caller` if it can be answered at once (see above), its activity recorded; nil,
    /// having sent nothing and changed nothing, when the call needs `handle`. Synchronous: the server answers on
    /// the thread that read the call, without a task.
    public func replyAtOnce(to call: VarlinkCall, caller connectionCaller: BrokerCaller) -> VarlinkReply? {
        // Only these methods' calls are decoded here: no other call's parameters (a password) are copied on this
        // thread, whose stack is not wiped as freed memory is.
        guard
            call.method == Broker1.AcquireTokenSilent.qualifiedName
                || call.method == Broker1.GetCurrentAccount.qualifiedName
                || call.method == Broker1.GetDeviceInformation.qualifiedName,
            let decoded = try? Broker1.Call(call), Self.mayAnswerAtOnce(decoded)
        else { return nil }
        let caller = actingConnections.caller(connectionCaller)
        var answer = replyAtOnce(to: decoded, caller: caller)
        // After any commit (anyone's) the policy known is older than the store: read it again (a read) and try once
        // more, so that the apps' calls keep coming at once on a store that changes.
        if answer == nil, (try? currentPolicy()) != nil { answer = replyAtOnce(to: decoded, caller: caller) }
        guard let answer else { return nil }
        if Self.isActivity(decoded) { idle.recordActivity() }
        return answer
    }

    /// The calls that may be answered at once: a silent token and the current account, asked without an MSAL client
    /// id (whose refusal is audited), a silent token without a forced refresh; the device's information.
    static func mayAnswerAtOnce(_ call: Broker1.Call) -> Bool {
        switch call {
        case .acquireTokenSilent(let parameters): parameters.msalClientId == nil && parameters.forceRefresh != true
        case .getCurrentAccount(let parameters): parameters.msalClientId == nil
        case .getDeviceInformation: true
        default: false
        }
    }

    /// The reply to `decoded` at once, or nil.
    private func replyAtOnce(to decoded: Broker1.Call, caller: BrokerCaller) -> VarlinkReply? {
        switch decoded {
        case .acquireTokenSilent(let parameters):
            guard let (application, known) = applicationAsLastKnown(for: caller, authority: parameters.authority),
                let result = try? application.cachedTokenSilent(scopes: parameters.scopes, ifStoreUnchangedSince: known)
                    ?? nil,
                let contract = try? Self.result(result, msalClientID: nil)
            else { return nil }
            return VarlinkReply(Broker1.AcquireTokenSilent.Reply(result: contract))
        case .getCurrentAccount:
            guard let (application, known) = applicationAsLastKnown(for: caller),
                let current = try? application.currentAccount(ifStoreUnchangedSince: known, readOnly: true) ?? nil
            else { return nil }
            return VarlinkReply(Self.currentAccountReply(current))
        case .getDeviceInformation(let parameters):
            // From the record and policy kept decoded (a read of the store's change stamp; after a commit, the
            // record read and decoded again): any caller may ask, nothing is written or audited.
            return VarlinkReply(getDeviceInformation(parameters, context: caller))
        default:
            return nil
        }
    }
}
