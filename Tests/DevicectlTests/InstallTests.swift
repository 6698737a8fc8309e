import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The systemd units and the install command, as an administrator uses them.
@Suite(.tags(.integration))
struct InstallTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func theUnitsPassSystemdAnalyzeVerify() async throws {
        let analyze = URL(fileURLWithPath: "/usr/bin/systemd-analyze")
        try #require(
            FileManager.default.isExecutableFile(atPath: analyze.path),
            "systemd-analyze is missing; run tools/setup"
        )
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("units-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var paths: [String] = []
        for unit in ["deviced.service", "deviced.socket", "devicectl-audit-journal.service"] {
            let text = try String(contentsOf: Self.root.appendingPathComponent("systemd/\(unit)"), encoding: .utf8)
                .replacingOccurrences(of: "@BINDIR@", with: DevicectlRunner.productsDirectory.path)
            let path = directory.appendingPathComponent(unit).path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            paths.append(path)
        }
        let result = try await DevicectlRunner.execute(analyze, ["verify", "--man=no"] + paths)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(
            (result.stdout + result.stderr).trimmingCharacters(in: .whitespacesAndNewlines).isEmpty,
            "\(result.stdout)\(result.stderr)"
        )
        let service = try String(contentsOfFile: paths[0], encoding: .utf8)
        let socket = try String(contentsOfFile: paths[1], encoding: .utf8)
        #expect(
            service.contains("Type=notify") && service.contains("ProtectSystem=strict")
                && service.contains("NoNewPrivileges=yes")
        )
        #expect(socket.contains("ListenStream=/run/devicectl/broker.sock") && socket.contains("SocketMode=0666"))
        let forwarder = try String(contentsOfFile: paths[2], encoding: .utf8)
        #expect(
            forwarder.contains("audit --jsonl --follow --cursor-file")
                && forwarder.contains("SyslogIdentifier=sharedmode-audit")
        )
    }

    /// libcurl (and the thirty libraries behind it) is loaded only when a request goes out: a keychain read or
    /// any other command that sends nothing starts without it.
    @Test func neitherBinaryLoadsLibcurlAtStart() async throws {
        for product in ["devicectl", "deviced"] {
            let result = try await DevicectlRunner.execute(
                URL(fileURLWithPath: "/usr/bin/ldd"),
                [DevicectlRunner.productsDirectory.appendingPathComponent(product).path]
            )
            #expect(result.status == 0 && result.stdout.contains("libsqlite3"), "\(result.stdout)\(result.stderr)")
            #expect(!result.stdout.contains("libcurl"), "\(product) links libcurl at start: \(result.stdout)")
        }
    }

    @Test func installPutsBinariesUnitsInterfaceAndCompletionsInPlace() async throws {
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("install-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: destination) }
        let result = try await DevicectlRunner.execute(
            Self.root.appendingPathComponent("tools/install"),
            [
                "--build-path", DevicectlRunner.productsDirectory.path, "--destdir", destination.path, "--prefix",
                "/usr/local", "--no-man",
            ]
        )
        #expect(result.status == 0, "\(result.stderr)")
        let prefix = destination.appendingPathComponent("usr/local")
        for file in [
            "bin/deviced", "bin/devicectl", "bin/msal-bridge",
            "share/dbus-1/services/com.microsoft.identity.broker1.service",
            "lib/systemd/system/deviced.service", "lib/systemd/system/deviced.socket",
            "lib/systemd/system/devicectl-audit-journal.service", "share/devicectl/org.sharedmode.Broker1.varlink",
            "share/bash-completion/completions/devicectl",
            "share/zsh/site-functions/_deviced", "share/fish/vendor_completions.d/devicectl.fish",
        ] {
            #expect(
                FileManager.default.fileExists(atPath: prefix.appendingPathComponent(file).path),
                "\(file) was not installed"
            )
        }
        let unit = try String(
            contentsOf: prefix.appendingPathComponent("lib/systemd/system/deviced.service"),
            encoding: .utf8
        )
        #expect(unit.contains("ExecStart=/usr/local/bin/deviced") && !unit.contains("@BINDIR@"))
        let activation = try String(
            contentsOf: prefix.appendingPathComponent("share/dbus-1/services/com.microsoft.identity.broker1.service"),
            encoding: .utf8
        )
        #expect(
            activation.contains("Name=com.microsoft.identity.broker1")
                && activation.contains("Exec=/usr/local/bin/msal-bridge"),
            "\(activation)"
        )
        let installed = try String(
            contentsOf: prefix.appendingPathComponent("share/devicectl/org.sharedmode.Broker1.varlink"),
            encoding: .utf8
        )
        #expect(
            installed
                == (try String(
                    contentsOf: Self.root.appendingPathComponent(
                        "Sources/BrokerContract/org.sharedmode.Broker1.varlink"
                    ),
                    encoding: .utf8
                ))
        )
        let completion = try String(
            contentsOf: prefix.appendingPathComponent("share/bash-completion/completions/devicectl"),
            encoding: .utf8
        )
        #expect(completion.contains("keychain"))
    }
}
