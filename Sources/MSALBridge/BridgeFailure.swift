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
        switch (error.code, error.identityCode) {
        case (.brokerUnavailable, _), (.limitExceeded, _):
            self.init(.serverTemporarilyUnavailable, context)
        case (.callerNotInPolicy, _):
            self.init(.accountUnusable, context, isPolicyRefusal: true)
        case (.msalClientNotAllowed, _):
            // MSAL's silent sign-in goes on to the interactive call, which is refused the same way.
            self.init(
                .interactionRequired,
                "\(context); the device policy's key is apps[].msalClientIds",
                isPolicyRefusal: true
            )
        case (.noCurrentAccount, _), (.currentAccountMismatch, _), (.identity, "interaction_required"),
            (.identity, "declined_scopes"):
            self.init(.interactionRequired, context)
        case (.identity, "user_canceled"), (.identity, "access_denied"), (.identity, "device_code_expired"),
            (.cancelled, _):
            self.init(.userCanceled, context)
        case (.identity, "authority_unreachable"), (.identity, "server_error"):
            self.init(.serverTemporarilyUnavailable, context)
        default:
            // An untrusted broker, the keychain's refusals, any other refusal or account failure.
            self.init(.accountUnusable, context)
        }
    }
}
