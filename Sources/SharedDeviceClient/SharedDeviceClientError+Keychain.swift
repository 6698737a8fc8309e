extension SharedDeviceClientError {
    /// The keychain's item-not-found (`errSecItemNotFound`, -25300): a find, update or delete that matched
    /// nothing. The same as `code == .itemNotFound`; `catch let error as SharedDeviceClientError where
    /// error.isItemNotFound` says "nothing there is fine".
    public var isItemNotFound: Bool { code == .itemNotFound }
}
