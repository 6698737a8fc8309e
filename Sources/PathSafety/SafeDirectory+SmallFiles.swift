public import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

extension SafeDirectory {
    /// The bytes of the regular file `name` in this directory (at most `limit`), read without following a
    /// symbolic link; `nil` when there is no such file.
    /// - Throws: `Errno` (`tooManySymbolicLinkLevels` for a link, `invalidArgument` for anything but a
    ///   regular file or one over `limit`).
    public func contents(of name: String, limit: Int) throws(Errno) -> [UInt8]? {
        let descriptor: FileDescriptor
        do throws(Errno) {
            descriptor = try openFile(name, .readOnly, options: [.nonBlocking])
        } catch let error where error == .noSuchFileOrDirectory {
            return nil
        }
        defer { try? descriptor.close() }  // read-only: nothing to lose
        let info = try descriptor.stat()
        guard info.type == .regular, info.size <= limit else { throw Errno.invalidArgument }
        var bytes = [UInt8](repeating: 0, count: Int(info.size))
        var filled = 0
        do {
            while filled < bytes.count {
                let count = try bytes.withUnsafeMutableBytes {
                    try descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[filled...]))
                }
                if count == 0 { break }
                filled += count
            }
        } catch {
            throw error as? Errno ?? .ioError
        }
        return Array(bytes[..<filled])
    }

    /// Replaces the file `name` in this directory with `bytes`: written to a new file (`O_EXCL`, never
    /// through a link) that is then renamed over `name` (`renameat`: a link at `name` is replaced, not followed).
    public func replace(
        _ name: String,
        with bytes: [UInt8],
        permissions: FilePermissions = [.ownerReadWrite]
    ) throws(Errno) {
        let temporary = ".\(name).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        let descriptor = try openFile(
            temporary,
            .writeOnly,
            options: [.create, .exclusiveCreate],
            permissions: permissions
        )
        do {
            _ = try descriptor.closeAfter { try descriptor.writeAll(bytes) }
            try rename(temporary, to: name)
        } catch {
            try? remove(temporary)
            throw error as? Errno ?? .ioError
        }
    }
}
