import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Who runs devicectl, as the audit log's actor: `devicectl (uid 0 root)`.
enum Actor {
    static var current: String {
        let uid = getuid()
        let name = getpwuid(uid).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "?"
        return "devicectl (uid \(uid) \(name))"
    }
}
