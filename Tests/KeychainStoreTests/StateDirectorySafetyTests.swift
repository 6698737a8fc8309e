import Foundation
import KeychainStore
import StoreTestSupport
import TestTags
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The store opens only a state directory nobody but root and its own user could swap, and never reaches
/// its files through a symbolic link.
@Suite(.tags(.needsRoot)) struct StateDirectorySafetyTests {
    static let otherUID: UInt32 = 1001

    func caught(_ body: () throws -> Void) -> KeychainError? {
        do { try body() } catch { return error as? KeychainError }
        return nil
    }

    @Test func aStateDirectoryInsideOneAnotherUserOwnsIsRefusedNamingItAndNothingIsWritten() throws {
        let parent = TemporaryStateDirectory("users-own")
        #expect(chown(parent.url.path, Self.otherUID, Self.otherUID) == 0)
        let state = parent.url.appendingPathComponent("state")
        let error = try #require(caught { _ = try KeychainStore(directory: state) })
        #expect(error.code == .insecureStateDirectory, "\(error)")
        #expect(
            error.message.contains("\(parent.url.path) is owned by uid \(Self.otherUID)")
                && error.message.contains("--state-dir"),
            "\(error)"
        )
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: parent.url.path).isEmpty,
            "the state directory was created"
        )
    }

    @Test func aStateDirectoryOthersMayWriteIsRefusedEvenWithTheStickyBit() throws {
        let directory = TemporaryStateDirectory("shared-state")
        #expect(chmod(directory.url.path, 0o1777) == 0)
        let error = try #require(caught { _ = try openStore(directory) })
        #expect(error.code == .insecureStateDirectory && error.message.contains("chmod go-w"), "\(error)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path).isEmpty)
    }

    @Test func aSymlinkAtTheDatabaseOrItsLogIsRefusedAndItsTargetUntouched() throws {
        for name in [KeychainStore.databaseFileName, KeychainStore.databaseFileName + "-wal"] {
            let directory = TemporaryStateDirectory("planted")
            let victim = directory.url.path + "-victim"
            try Data("root's own".utf8).write(to: URL(fileURLWithPath: victim))
            defer { unlink(victim) }
            try FileManager.default.createSymbolicLink(
                atPath: directory.url.appendingPathComponent(name).path,
                withDestinationPath: victim
            )
            let error = try #require(caught { _ = try openStore(directory) })
            #expect(
                error.code == .insecureStateDirectory && error.message.contains("symbolic link"),
                "\(name): \(error)"
            )
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "root's own")
        }
    }
}
