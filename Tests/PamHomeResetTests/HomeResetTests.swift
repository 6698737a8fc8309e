import Foundation
import PamHomeReset
import TestTags
import Testing

/// The session user's fresh home, on real local accounts (useradd) and a real skeleton: whatever the last
/// session left, symlinks out of the home included, is removed without following any, and the skeleton's
/// copies are the account's.
@Suite(.serialized, .tags(.needsRoot)) struct HomeResetTests {
    /// A local account with its home under a scratch directory, removed with it by `remove`.
    struct Account {
        let name = "homereset\(UInt32.random(in: 10000...99999))"
        let scratch = URL(fileURLWithPath: "/tmp/home-reset-\(UUID().uuidString.prefix(8))")
        var home: URL { scratch.appendingPathComponent("home") }

        init(homeIsALinkTo target: URL? = nil) throws {
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            if let target {
                try FileManager.default.createSymbolicLink(at: home, withDestinationURL: target)
            }
            try Self.run(
                "/usr/sbin/useradd",
                [target == nil ? "-m" : "-M", "-d", home.path, "-K", "UID_MIN=20000", "-K", "GID_MIN=20000", name]
            )
        }

        func remove() {
            try? Self.run("/usr/sbin/userdel", [name])
            try? FileManager.default.removeItem(at: scratch)
        }

        /// Runs useradd or userdel until it succeeds: suites running in parallel hold the password file's
        /// lock a moment, and the tools then fail rather than wait (6, no such user, and 9, the name taken, do
        /// not pass).
        static func run(_ tool: String, _ arguments: [String]) throws {
            var status: Int32 = -1
            for _ in 0..<100 {
                let process = try Process.run(URL(fileURLWithPath: tool), arguments: arguments)
                process.waitUntilExit()
                status = process.terminationStatus
                if status == 0 || status == 6 || status == 9 { break }
                usleep(100_000)
            }
            try #require(status == 0, "\(tool) \(arguments) exited \(status)")
        }
    }

    static func write(_ text: String, _ url: URL) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try text.write(to: url, atomically: false, encoding: .utf8)
    }

    static func owner(_ url: URL) throws -> String? {
        try FileManager.default.attributesOfItem(atPath: url.path)[.ownerAccountName] as? String
    }

    @Test func whatTheLastSessionLeftIsGoneAndTheSkeletonIsTheAccounts() throws {
        let account = try Account()
        defer { account.remove() }
        let outside = account.scratch.appendingPathComponent("outside")
        try Self.write("root's\n", outside.appendingPathComponent("precious"))
        try Self.write("inside\n", outside.appendingPathComponent("dir/file"))
        // The last session's leftovers: nested files, links out of the home to a file and to a directory.
        try Self.write("worker data\n", account.home.appendingPathComponent("a/b/notes.txt"))
        try FileManager.default.createSymbolicLink(
            at: account.home.appendingPathComponent("link"),
            withDestinationURL: outside.appendingPathComponent("precious")
        )
        try FileManager.default.createSymbolicLink(
            at: account.home.appendingPathComponent("a/dirlink"),
            withDestinationURL: outside.appendingPathComponent("dir")
        )
        // A skeleton with a nested file, a link and a setuid file (its copy loses the bit).
        let skeleton = account.scratch.appendingPathComponent("skel")
        try Self.write("profile\n", skeleton.appendingPathComponent(".profile"))
        try Self.write("config\n", skeleton.appendingPathComponent(".config/app/settings"))
        try FileManager.default.createSymbolicLink(
            atPath: skeleton.appendingPathComponent("docs").path,
            withDestinationPath: ".config"
        )
        try Self.write("tool\n", skeleton.appendingPathComponent("tool"))
        try FileManager.default.setAttributes(
            [.posixPermissions: 0o4755],
            ofItemAtPath: skeleton.appendingPathComponent("tool").path
        )

        try HomeReset.reset(user: account.name, skeleton: skeleton.path)

        let names = try FileManager.default.contentsOfDirectory(atPath: account.home.path).sorted()
        #expect(names == [".config", ".profile", "docs", "tool"], "\(names)")
        #expect(
            try String(contentsOf: account.home.appendingPathComponent(".config/app/settings"), encoding: .utf8)
                == "config\n"
        )
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: account.home.appendingPathComponent("docs").path)
                == ".config"
        )
        for path in ["", ".profile", ".config", ".config/app", ".config/app/settings", "docs", "tool"] {
            let url = path.isEmpty ? account.home : account.home.appendingPathComponent(path)
            let owner = try Self.owner(url)
            #expect(owner == account.name, "\(path) belongs to \(owner ?? "nobody")")
        }
        let toolMode =
            try FileManager.default.attributesOfItem(
                atPath: account.home.appendingPathComponent("tool").path
            )[.posixPermissions] as? Int
        #expect(toolMode == 0o755, "the setuid bit was copied: \(String(toolMode ?? 0, radix: 8))")
        // Nothing the links pointed at was followed.
        #expect(try String(contentsOf: outside.appendingPathComponent("precious"), encoding: .utf8) == "root's\n")
        #expect(try String(contentsOf: outside.appendingPathComponent("dir/file"), encoding: .utf8) == "inside\n")
        #expect(try Self.owner(outside.appendingPathComponent("precious")) == "root")
    }

    @Test func aHomeThatIsALinkOrRootsIsNotReset() throws {
        let target = URL(fileURLWithPath: "/tmp/home-reset-target-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: target) }
        try Self.write("elsewhere\n", target.appendingPathComponent("keep"))
        let account = try Account(homeIsALinkTo: target)
        defer { account.remove() }
        #expect(throws: HomeReset.Failure.self) { try HomeReset.reset(user: account.name) }
        #expect(FileManager.default.fileExists(atPath: target.appendingPathComponent("keep").path))
        #expect(throws: HomeReset.Failure.self) { try HomeReset.reset(user: "root") }
        #expect(throws: HomeReset.Failure.self) { try HomeReset.reset(user: "no-such-account-here") }
    }
}
