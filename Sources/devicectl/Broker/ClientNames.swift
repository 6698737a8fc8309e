import SharedDeviceClient

// The client's types under names of their own, for devicectl's files that also see the library's types of
// the same names (KeychainStore's and SharedDevice's).

typealias ClientAccount = Account
typealias ClientCurrentAccount = CurrentAccount
typealias ClientAuthenticationResult = AuthenticationResult
typealias ClientIdleState = IdleState
typealias ClientKeychainItem = KeychainItem
typealias ClientItemQuery = ItemQuery
typealias ClientItemChanges = ItemChanges
typealias ClientDeviceCodeVerification = DeviceCodeVerification
typealias ClientApplication = PublicClientApplication
typealias ClientInteractiveTokenParameters = InteractiveTokenParameters
typealias ClientInteractiveFlow = InteractiveFlow
typealias ClientAccountEvent = AccountEvent
