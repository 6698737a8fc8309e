import GRDB

/// Maps SQLite failures to keychain errors. GRDB's messages carry the SQL but never bound values,
/// and the store's SQL holds no secrets, so the SQLite message is safe to pass on.
enum DatabaseErrors {
    static func map(_ error: DatabaseError, path: String, busyTimeout: Double) -> KeychainError {
        let detail = error.message ?? "\(error.resultCode)"
        switch error.resultCode {
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return KeychainError(
                .storeBusy,
                "another process kept the store locked for more than \(Int(busyTimeout)) s; retry when it has finished"
            )
        case .SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_FORMAT:
            return KeychainError(
                .corruptStore,
                "the database \(path) is damaged or is not a keychain store (\(detail)); restore it from backup"
            )
        case .SQLITE_READONLY, .SQLITE_PERM, .SQLITE_AUTH, .SQLITE_CANTOPEN:
            return KeychainError(
                .ioError,
                "cannot open or write \(path) (\(detail)); check the state directory's owner and permissions"
            )
        case .SQLITE_FULL:
            return KeychainError(.diskFull, "the disk holding \(path) is full; free space and retry")
        case .SQLITE_CONSTRAINT:
            return KeychainError(
                .corruptStore,
                "the store's tables are inconsistent (\(detail)); run `devicectl keychain verify`"
            )
        default:
            return KeychainError(.ioError, "the store at \(path) failed: \(detail)")
        }
    }
}
