extension SharedDeviceClientError {
    /// The keychain's item-not-found (`errSecItemNotFound`, -25300): a find, update or delete that matched
    /// nothing. Test this instead of matching the error's case and status, so that code which accepts
    /// "nothing there" (`catch let error as SharedDeviceClientError where error.isItemNotFound`) keeps working
    /// whatever shape the error takes.
    public var isItemNotFound: Bool { keychainStatus == Self.itemNotFoundStatus }

    /// The keychain's OSStatus when the keychain refused the call (-25300 item not found, -25299 duplicate,
    /// -34018 missing entitlement, -34 quota exceeded or disk full, -50 invalid parameter), nil for any other
    /// failure.
    public var keychainStatus: Int? {
        if case .keychain(let status, _, _) = self { status } else { nil }
    }

    /// `errSecItemNotFound`.
    static let itemNotFoundStatus = -25300
}
