import SharedDeviceClient

/// Why the bridge answers a token request with an error: the MSALRuntime status and the context the app
/// sees (what happened, what to do; never a secret).
struct BridgeFailure: Error, Sendable {
    let status: BrokerProtocolStatus
    let context: String
    /// The device policy refused the app or its client id (a sign-in cannot help).
    var isPolicyRefusal = false

    init(_ status: BrokerProtocolStatus, _ context: String, isPolicyRefusal: Bool = false) {
        self.status = status
        self.context = context
        self.isPolicyRefusal = isPolicyRefusal
    }

    /// The status of a failed call to the device's broker.
    init(_ error: SharedDeviceClientError) {
        let context = "\(error)"
        switch error {
        case .brokerUnavailable:
            self.init(.serverTemporarilyUnavailable, context)
        case .callerNotInPolicy:
            self.init(.accountUnusable, context, isPolicyRefusal: true)
        case .account(let code, _, _, let identityCode):
            switch (code, identityCode) {
            case ("msalClientNotAllowed", _):
                // MSAL's silent sign-in goes on to the interactive call, which is refused the same way.
                self.init(.interactionRequired, "\(context); the device policy's key is apps[].msalClientIds", isPolicyRefusal: true)
            case ("noCurrentAccount", _), ("currentAccountMismatch", _), (_, "interaction_required"), (_, "declined_scopes"):
                self.init(.interactionRequired, context)
            case (_, "user_canceled"), (_, "access_denied"), (_, "device_code_expired"):
                self.init(.userCanceled, context)
            case (_, "authority_unreachable"), (_, "server_error"):
                self.init(.serverTemporarilyUnavailable, context)
            default:
                self.init(.accountUnusable, context)
            }
        case .limitExceeded:
            self.init(.serverTemporarilyUnavailable, context)
        case .cancelled:
            self.init(.userCanceled, context)
        case .untrustedBroker, .keychain, .refused:
            self.init(.accountUnusable, context)
        }
    }
}
