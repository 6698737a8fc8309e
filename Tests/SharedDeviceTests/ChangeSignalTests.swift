import Foundation
import SharedDevice
import StoreTestSupport
import Testing

/// The account-change signal file is reached relative to the state directory and never through a link.
@Suite struct ChangeSignalTests {
    @Test func aSymlinkPlantedAtTheSignalFileIsNeitherWrittenThroughNorWatched() throws {
        let directory = TemporaryStateDirectory("signal")
        let victim = directory.url.path + "-victim"
        try Data("root's own".utf8).write(to: URL(fileURLWithPath: victim))
        defer { try? FileManager.default.removeItem(atPath: victim) }
        let signal = ChangeSignal(directory: directory.url)
        try FileManager.default.createSymbolicLink(atPath: signal.url.path, withDestinationPath: victim)
        signal.notify()
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "root's own")
        do {
            _ = try signal.watch()
            Issue.record("a watch on a symbolic link was set up")
        } catch let error as SharedDeviceError {
            #expect(error.message.contains("\(signal.url.path) is a symbolic link"), "\(error)")
        }
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: signal.url.path) == victim)
    }

    @Test func theSignalFileIsCreatedPrivateAndWatched() throws {
        let directory = TemporaryStateDirectory("signal")
        let signal = ChangeSignal(directory: directory.url)
        let watcher = try signal.watch()
        let mode = try FileManager.default.attributesOfItem(atPath: signal.url.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        signal.notify()
        #expect(watcher.wait(timeout: .seconds(30)))
    }
}
