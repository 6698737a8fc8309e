#if canImport(Glibc)
import Glibc
#endif

/// Lookups in the system's user and group databases (NSS: /etc/passwd, /etc/group, LDAP, …).
public enum UserDatabase {
    /// The uid of the user named `name` (`getpwnam_r(3)`), `nil` when there is no such user.
    public static func uid(ofUser name: String) -> UInt32? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.pw_uid
    }

    /// The gid and member names of the group named `name` (`getgrnam_r(3)`), `nil` when there is no such group.
    public static func groupEntry(named name: String) -> (gid: UInt32, members: [String])? {
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getgrnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        var members: [String] = []
        if var cursor = entry.gr_mem {
            while let member = cursor.pointee {
                members.append(String(cString: member))
                cursor += 1
            }
        }
        return (entry.gr_gid, members)
    }

    /// The login name and primary gid of `uid` (`getpwuid_r(3)`), `nil` when it has no entry.
    public static func user(uid: UInt32) -> (name: String, gid: UInt32)? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name
        else { return nil }
        return (String(cString: name), entry.pw_gid)
    }
}
