import KeychainStore

// The store's types under names of their own, for devicectl's files that also see the client's types of
// the same names (SharedDeviceClient's).

typealias StoreKeychainItem = KeychainItem
typealias StoreItemQuery = ItemQuery
typealias StoreItemChanges = ItemChanges
