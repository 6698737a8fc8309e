import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The keychain read commands' plain parse (which skips ArgumentParser to start faster) against
/// ArgumentParser's own: for every argument list, the same exit status, output and error with the plain
/// parse on and off (`DEVICECTL_FULL_PARSE=1`), and the plain parse taken exactly for plain arguments.
@Suite(.tags(.integration))
struct PlainArgumentsCLITests {
    static let scanner = [
        "--app", "com.contoso.scanner", "--entitlements", "com.microsoft.adalcache,com.contoso.scanner",
    ]
    static let marker = "arguments parsed without ArgumentParser"

    /// Argument lists the plain parse takes (the runner appends `--state-dir DIR`).
    static let plain: [[String]] = [
        ["keychain", "find-generic-password"] + scanner + ["--service", "graph"],
        ["keychain", "find-generic-password"] + scanner + ["--service=graph", "--account", "worker-1", "--json"],
        ["keychain", "find-generic-password", "--all"] + scanner,
        ["keychain", "find-generic-password", "--all", "--print-secret", "--json"] + scanner,
        ["keychain", "find-generic-password", "--type", "2001", "--print-secret"] + scanner,
        ["keychain", "find-generic-password", "--label", "Graph token", "--access-group", "com.microsoft.adalcache"]
            + scanner,
        ["keychain", "find-generic-password", "--access-group=com.contoso.scanner", "--all", "--json"] + scanner,
        ["keychain", "find-generic-password", "--account", "worker-2"] + scanner,
        ["keychain", "find-generic-password", "--service", ""] + scanner,  // an empty value is a value
        ["keychain", "find-generic-password", "--service=-x"] + scanner,  // an attached value may start with a dash
        ["keychain", "find-generic-password", "--service", "nothing-here", "--log-level", "error"] + scanner,
        [
            "keychain", "find-generic-password", "--service", "graph", "--entitlements", "com.other", "--app",
            "com.contoso.scanner",
        ],
        ["keychain", "find-generic-password", "--service", "graph"],  // no --app: the command's own usage error
        ["keychain", "find-generic-password", "--service", "graph", "--key-file", "/nonexistent/key"] + scanner,
        ["keychain", "list"] + scanner,
        ["keychain", "list", "--json", "--service", "graph"] + scanner,
        ["keychain", "list", "--account", "worker-1", "--access-group", "com.contoso.scanner"] + scanner,
        ["keychain", "list", "--type=7"] + scanner,
    ]

    /// Argument lists left to ArgumentParser: help, unknown, repeated or malformed options, values that
    /// look like options, failed validation, other commands.
    static let declined: [[String]] = [
        ["keychain", "find-generic-password", "--help"],
        ["keychain", "find-generic-password", "-h"],
        ["keychain", "list", "--help"],
        ["keychain", "find-generic-password"] + scanner + ["--service"],
        ["keychain", "find-generic-password"] + scanner + ["--service", "--account", "worker-1"],
        ["keychain", "find-generic-password"] + scanner + ["--service", "-x"],
        ["keychain", "find-generic-password"] + scanner + ["--service", "graph", "--service", "other"],
        ["keychain", "find-generic-password"] + scanner + ["--type", "abc"],
        ["keychain", "find-generic-password"] + scanner + ["--type", "4294967296"],
        ["keychain", "find-generic-password"] + scanner + ["--type=-1"],
        ["keychain", "find-generic-password"] + scanner + ["--log-level", "loud"],
        ["keychain", "find-generic-password"] + scanner + ["--bogus", "1"],
        ["keychain", "find-generic-password"] + scanner + ["extra"],
        ["keychain", "find-generic-password"] + scanner + ["--json=yes"],
        ["keychain", "find-generic-password"] + scanner + ["--all", "--all"],
        ["keychain", "find-generic-password"] + scanner + ["--", "--service", "graph"],
        ["keychain", "find-generic-password"] + scanner + ["--key-file", "/k", "--passphrase-file", "/p"],
        ["keychain", "list"] + scanner + ["--all"],
        ["keychain", "list"] + scanner + ["--print-secret"],
        ["keychain", "find-generic-password"] + scanner + ["--secret-stdin"],
        ["keychain", "delete-generic-password"] + scanner + ["--service", "nothing-here"],
        ["keychain"],
        ["keychain", "find"],
        ["keychain", "--app", "com.contoso.scanner", "find-generic-password"],
    ]

    @Test func everyArgumentListGetsTheSameAnswerWithAndWithoutThePlainParse() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        let items: [(String, String, [String])] = [
            ("graph", "worker-1", ["--label", "Graph token", "--type", "2001"]), ("mail", "worker-2", []),
            ("notes", "worker-1", ["--access-group", "com.contoso.scanner"]),
        ]
        for (service, account, extra) in items {
            let add = try await cli.run(
                ["keychain", "add-generic-password"] + Self.scanner
                    + ["--service", service, "--account", account, "--secret-stdin"] + extra,
                stdin: "secret-\(service)"
            )
            try #require(add.status == 0, "\(add.stderr)")
        }
        for arguments in Self.plain + Self.declined {
            let plain = try await cli.run(arguments)
            let full = try await cli.run(arguments, environment: ["DEVICECTL_FULL_PARSE": "1"])
            #expect(plain.status == full.status, "\(arguments): exit \(plain.status) vs \(full.status)")
            #expect(plain.stdout == full.stdout, "\(arguments): output differs:\n\(plain.stdout)\n---\n\(full.stdout)")
            #expect(plain.stderr == full.stderr, "\(arguments): error differs:\n\(plain.stderr)\n---\n\(full.stderr)")
        }
        // The cases cover what they claim: successes, the command's own errors, and ArgumentParser's.
        let statuses = try await Self.plain.asyncMap { try await cli.run($0).status }
        #expect(statuses.filter { $0 == 0 }.count >= 8 && Set(statuses).isSuperset(of: [0, 44, 64]), "\(statuses)")
    }

    @Test func thePlainParseIsTakenForPlainArgumentsOnly() async throws {
        let cli = DevicectlRunner()
        defer { cli.cleanUp() }
        for arguments in Self.plain where !arguments.contains("--log-level") {
            let run = try await cli.run(arguments + ["--log-level", "trace"])
            #expect(run.stderr.contains(Self.marker), "\(arguments) went through ArgumentParser")
            let full = try await cli.run(
                arguments + ["--log-level", "trace"],
                environment: ["DEVICECTL_FULL_PARSE": "1"]
            )
            #expect(!full.stderr.contains(Self.marker), "\(arguments) ignored DEVICECTL_FULL_PARSE=1")
        }
        for arguments in Self.declined {
            let run = try await cli.run(arguments, environment: ["DEVICECTL_LOG_LEVEL": "trace"])
            #expect(!run.stderr.contains(Self.marker), "\(arguments) took the plain parse")
        }
    }
}

extension Sequence {
    /// `map` with an async transform, one element after the other.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
