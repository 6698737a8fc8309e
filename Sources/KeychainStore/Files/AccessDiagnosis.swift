import SystemPackage

/// Says why this process may not use a file of the store, in words an administrator can act on:
/// which file, who owns it, who we are, and what to do.
enum AccessDiagnosis {
    /// A message for a permission failure (`EACCES`/`EPERM`) on `path` while doing `action`
    /// ("open the store", "read the key file").
    ///
    /// It names the nearest existing file or directory on the way to `path` that this user can see,
    /// its owner and mode, so "Permission denied" on a store that exists reads as what it is: a store
    /// that belongs to another user.
    static func permissionDenied(_ action: String, path: FilePath, error: Errno) -> String {
        let me = Syscalls.effectiveUserID
        let myName = Syscalls.userName(me).map { "\($0) (uid \(me))" } ?? "uid \(me)"
        var candidate = path
        while true {
            if let info = try? candidate.stat() {
                let owner = info.userID.rawValue
                let ownerName = Syscalls.userName(owner).map { "\($0) (uid \(owner))" } ?? "uid \(owner)"
                let bits: UInt32 = UInt32(info.permissions.rawValue) & 0o7777
                let mode = "0\(String(bits, radix: 8))"
                let what = candidate == path ? "it exists and is" : "\(candidate) is"
                let advice = "run as \(ownerName), or choose a state directory of your own with --state-dir"
                return
                    "cannot \(action) \(path): \(error); \(what) owned by \(ownerName) with mode \(mode) and this process runs as \(myName): \(advice)"
            }
            let parent: FilePath = candidate.removingLastComponent()
            if parent == candidate || parent.isEmpty { break }
            candidate = parent
        }
        return
            "cannot \(action) \(path): \(error); this process runs as \(myName): check the owner and mode of the state directory, or choose another with --state-dir"
    }

    /// Whether `error` is a permission failure.
    static func isPermissionFailure(_ error: Errno) -> Bool {
        error == .permissionDenied || error == .notPermitted
    }
}
