import Foundation
import PathSafety
import SystemPackage
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `SafeDirectory.open` walks a path the way systemd's `CHASE_SAFE` does, and what it holds is used by
/// descriptor. Runs as root: directories are handed to another uid with chown.
@Suite(.serialized, .tags(.needsRoot)) struct SafeDirectoryTests {
    static let otherUID: UInt32 = 1001

    /// A scratch directory under /tmp (root-owned, sticky), removed at the end.
    final class Scratch {
        let path: String
        init() throws {
            path = "/tmp/safe-directory-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(
                atPath: path,
                withIntermediateDirectories: false,
                attributes: [.posixPermissions: 0o755]
            )
        }
        /// Makes `name` (a directory, mode `mode`, owned by `owner`) and returns its path.
        @discardableResult
        func directory(_ name: String, mode: Int = 0o755, owner: UInt32 = 0) throws -> String {
            let made = path + "/" + name
            try FileManager.default.createDirectory(atPath: made, withIntermediateDirectories: false)
            #expect(chmod(made, mode_t(mode)) == 0 && chown(made, owner, owner) == 0)
            return made
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    static func open(_ path: String, creating: Bool = false) throws(PathSafetyError) -> SafeDirectory {
        try SafeDirectory.open(
            path,
            purpose: "the test directory",
            alternative: "choose another",
            creatingWith: creating ? [.ownerReadWriteExecute] : nil
        )
    }

    @Test func aDirectoryBelowOneAnotherUserOwnsIsRefusedNamingThatComponentAndTheFix() throws {
        let scratch = try Scratch()
        let users = try scratch.directory("users", owner: Self.otherUID)
        let inside = users + "/roots"
        try FileManager.default.createDirectory(atPath: inside, withIntermediateDirectories: false)  // root-owned
        let error = try #require(throws: PathSafetyError.self) { try Self.open(inside) }
        #expect(error.reason == .unsafe && error.component == users, "\(error)")
        #expect(
            error.message.contains("\(users) is owned by uid \(Self.otherUID)")
                && error.message.contains("chown root \(users)"),
            "\(error)"
        )
        // The user's directory itself, as the last component, is refused the same way.
        #expect(throws: PathSafetyError.self) { try Self.open(users) }
    }

    @Test func aDirectoryOthersMayWriteWithoutTheStickyBitIsRefused() throws {
        let scratch = try Scratch()
        for (mode, who) in [(0o777, "every user"), (0o775, "its group")] {
            let open = try scratch.directory("open-\(String(mode, radix: 8))", mode: mode)
            try FileManager.default.createDirectory(atPath: open + "/below", withIntermediateDirectories: false)
            let error = try #require(throws: PathSafetyError.self) { try Self.open(open + "/below") }
            #expect(error.reason == .unsafe && error.component == open, "\(error)")
            #expect(
                error.message.contains("writable by \(who)") && error.message.contains("chmod go-w \(open)"),
                "\(error)"
            )
        }
    }

    @Test func aRootOwnedStickyDirectoryLikeTmpIsAccepted() throws {
        let scratch = try Scratch()
        let shared = try scratch.directory("shared", mode: 0o1777)
        let mine = shared + "/mine"
        try FileManager.default.createDirectory(atPath: mine, withIntermediateDirectories: false)
        let held = try Self.open(mine)
        #expect(held.path == mine && held.ownerID == 0)
        #expect(try Self.open("/tmp").path == "/tmp")
        // Below a sticky directory, one another user made is still theirs: refused.
        let theirs = try scratch.directory("shared/theirs", owner: Self.otherUID)
        #expect(throws: PathSafetyError.self) { try Self.open(theirs) }
    }

    @Test func aSymlinkRootOwnsIsFollowedAndOneAnotherUserOwnsIsRefused() throws {
        let scratch = try Scratch()
        let target = try scratch.directory("target")
        try FileManager.default.createSymbolicLink(atPath: scratch.path + "/roots-link", withDestinationPath: "target")
        #expect(try Self.open(scratch.path + "/roots-link").path == target)
        try FileManager.default.createSymbolicLink(atPath: scratch.path + "/users-link", withDestinationPath: target)
        #expect(lchown(scratch.path + "/users-link", Self.otherUID, Self.otherUID) == 0)
        let error = try #require(throws: PathSafetyError.self) { try Self.open(scratch.path + "/users-link") }
        #expect(
            error.component == scratch.path + "/users-link"
                && error.message.contains("symbolic link owned by uid \(Self.otherUID)"),
            "\(error)"
        )
    }

    @Test func missingDirectoriesAreCreatedBelowSafeOnesOnlyAndNothingBelowAnUnsafeOne() throws {
        let scratch = try Scratch()
        let made = try Self.open(scratch.path + "/a/b", creating: true)
        #expect(made.path == scratch.path + "/a/b" && made.permissions == 0o700)
        let users = try scratch.directory("users", owner: Self.otherUID)
        #expect(throws: PathSafetyError.self) { try Self.open(users + "/new", creating: true) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: users).isEmpty)
        // Not creating, a missing directory is named.
        let missing = try #require(throws: PathSafetyError.self) { try Self.open(scratch.path + "/none") }
        #expect(
            missing.reason == .system(.noSuchFileOrDirectory)
                && missing.message.contains("\(scratch.path)/none is missing"),
            "\(missing)"
        )
    }

    @Test func filesAreOpenedWithoutFollowingASymlinkPlantedAtTheirName() throws {
        let scratch = try Scratch()
        let victim = scratch.path + "/victim"
        try Data("root's".utf8).write(to: URL(fileURLWithPath: victim))
        #expect(chmod(victim, 0o600) == 0)
        let state = try scratch.directory("state", mode: 0o700)
        try FileManager.default.createSymbolicLink(atPath: state + "/signal", withDestinationPath: victim)
        let held = try Self.open(state)
        #expect(throws: Errno.tooManySymbolicLinkLevels) { try held.openFile("signal", .writeOnly, options: [.create]) }
        #expect(throws: Errno.tooManySymbolicLinkLevels) { try held.openFile("signal", .readOnly) }
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "root's")
        #expect(try held.status(of: "signal").type == .symbolicLink)
    }

    @Test func theHeldDirectoryIsUsedAfterItsPathIsSwappedForASymlink() throws {
        let scratch = try Scratch()
        let original = try scratch.directory("dir")
        let elsewhere = try scratch.directory("elsewhere")
        let held = try Self.open(original)
        #expect(rename(original, scratch.path + "/moved") == 0)
        #expect(symlink(elsewhere, original) == 0)
        try held.openFile("file", .writeOnly, options: [.create]).close()
        #expect(FileManager.default.fileExists(atPath: scratch.path + "/moved/file"))
        #expect(!FileManager.default.fileExists(atPath: elsewhere + "/file"))
        try held.setPermissions(of: "file", to: [.ownerReadWrite, .otherRead])
        try held.rename("file", to: "renamed")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/moved") == ["renamed"])
    }
}
