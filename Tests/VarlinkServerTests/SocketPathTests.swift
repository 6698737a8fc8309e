import Foundation
import PathSafety
import Testing

@testable import VarlinkServer

#if canImport(Glibc)
import Glibc
#endif

/// The socket is staged, made connectable and moved into place through held directories, never paths.
@Suite struct SocketPathTests {
    /// Binds a listening-capable Unix socket at `path` (the staging directory reached through its descriptor).
    static func bindSocket(at path: String) throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        try #require(descriptor >= 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        try #require(bytes.count < MemoryLayout.size(ofValue: address.sun_path))
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(bound == 0, "bind \(path): \(String(cString: strerror(errno)))")
        return descriptor
    }

    @Test func publishSetsTheModeAndRenamesThroughTheHeldStagingDirectoryEvenIfItsPathIsSwapped() throws {
        let base = "/tmp/socket-path-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: base + "/socket", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        // What an attacker would point the staging path at: a private file with the socket's name.
        let decoy = base + "/decoy"
        try FileManager.default.createDirectory(atPath: decoy, withIntermediateDirectories: false)
        try Data("root's".utf8).write(to: URL(fileURLWithPath: decoy + "/broker.sock"))
        #expect(chmod(decoy + "/broker.sock", 0o600) == 0)

        let socketPath = SocketPath(path: base + "/socket/broker.sock")
        let directory = try socketPath.prepare()
        let staging = try socketPath.makeStagingDirectory(in: directory)
        #expect(staging.bindPath.hasPrefix("/proc/self/fd/"), "\(staging.bindPath)")
        let listening = try Self.bindSocket(at: staging.bindPath)
        defer { close(listening) }
        // The staging directory's path now leads to the decoy; the held descriptor still leads to the socket.
        #expect(rename(base + "/socket/" + staging.name, base + "/moved") == 0)
        #expect(symlink(decoy, base + "/socket/" + staging.name) == 0)

        let identity = try socketPath.publish(from: staging, to: directory)
        var info = stat()
        #expect(lstat(base + "/socket/broker.sock", &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFSOCK && info.st_mode & 0o777 == 0o666)
        #expect(UInt64(info.st_ino) == identity.inode)
        #expect(
            stat(decoy + "/broker.sock", &info) == 0 && info.st_mode & 0o777 == 0o600
                && info.st_mode & S_IFMT == S_IFREG
        )
        #expect(try String(contentsOfFile: decoy + "/broker.sock", encoding: .utf8) == "root's")

        socketPath.remove(ifStill: identity, in: directory)
        #expect(lstat(base + "/socket/broker.sock", &info) != 0)
    }
}
