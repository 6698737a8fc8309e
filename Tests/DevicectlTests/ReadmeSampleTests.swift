import Foundation
import ProcessTestSupport
import TestTags
import Testing

/// The README's app samples, as an app developer would take them. The Swift app is the test-only target
/// `readme-kiosk-app`, whose main.swift must be the README's block byte for byte (the package builds it as an
/// app would: Swift 6 mode, linking SharedDeviceClient only), so no second toolchain run or SwiftNIO build
/// is needed; the Python app is the README's block written to a file. Both run under the policy's apps' uids
/// against a real broker with the local identity provider as its authority, through one shift: the Swift app
/// signs the worker in by device code, both get tokens and keep a secret in their own group, and both hear the
/// administrator's sign-out.
@Suite(.serialized, .tags(.integration, .needsRoot, .needsIdentityProvider)) struct ReadmeSampleTests {
    typealias Daemon = BrokerDaemon
    typealias Provider = IdentityCLITests.Provider

    static let swiftSource = ReadmeBlocks.packageRoot.appendingPathComponent(
        "Tests/Workers/readme-kiosk-app/main.swift"
    )

    @Test func theBuiltSwiftAppIsTheReadmesSample() throws {
        let sample = try ReadmeBlocks.block("swift-app")
        let source = try String(contentsOf: Self.swiftSource, encoding: .utf8)
        #expect(
            source == sample,
            "Tests/Workers/readme-kiosk-app/main.swift and the README's Swift sample differ: copy one to the other"
        )
    }

    @Test func theSwiftAndPythonSamplesGoThroughAShiftUnderTheAppsUids() async throws {
        let daemon = try await BrokerSignInTests.daemon()
        // The Swift app, as the scanner; stdbuf gives its standard output the line buffering of a terminal.
        let swiftApp = daemon.publicDirectory.appendingPathComponent("KioskApp").path
        try ExecutableCopy.copy(
            from: DevicectlRunner.productsDirectory.appendingPathComponent("readme-kiosk-app").path,
            to: swiftApp
        )
        let lock = try await IdentityCLITests.ProviderLock.acquire(timeout: 120)
        let swift = try ChildProcess(
            Daemon.setpriv,
            ["--pdeathsig", "KILL"] + Daemon.asUser(Daemon.scannerUID) + ["/usr/bin/stdbuf", "-oL", swiftApp],
            environment: daemon.clientEnvironment
        )
        defer { _ = swift.killIfRunning() }
        let shown = await swift.waitForLine(timeout: 60) { $0.hasPrefix("enter ") }
        let code = shown?.split(separator: " ").dropFirst().first.map(String.init)
        guard let code else {
            lock.release()
            Issue.record("the Swift sample showed no device code: \(swift.lines) \(swift.standardError)")
            await daemon.cleanUp()
            return
        }
        let approval = try await Provider.tool([
            "approve", "--port", "\(IdentityCLITests.port)", "--code", code, "--user", "worker1",
        ])
        lock.release()
        #expect(approval.status == 0, "\(approval.stderr)")
        try #require(
            await swift.waitForLine(timeout: 90) { $0 == "waiting for the sign-out" } != nil,
            "\(swift.lines) \(swift.standardError); the daemon's log ends: \(daemon.logTail())"
        )
        let worker = try #require(
            swift.lines.first { $0.hasPrefix("worker ") }?.dropFirst("worker ".count).split(separator: ",").first.map(
                String.init
            )
        )

        // The Python app, as the timeclock, with PyPI varlink where tools/setup puts it (the README's first way).
        let pythonApp = daemon.publicDirectory.appendingPathComponent("kiosk_app.py").path
        try Data(try ReadmeBlocks.block("python-app").utf8).write(to: URL(fileURLWithPath: pythonApp))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: pythonApp)
        try #require(
            FileManager.default.fileExists(atPath: Daemon.pythonPath + "/varlink"),
            "PyPI varlink is not in \(Daemon.pythonPath); run tools/setup"
        )
        let python = try ChildProcess(
            Daemon.setpriv,
            ["--pdeathsig", "KILL"] + Daemon.asUser(Daemon.timeclockUID) + ["/usr/bin/python3", pythonApp],
            environment: daemon.clientEnvironment.merging(["PYTHONPATH": Daemon.pythonPath, "PYTHONUNBUFFERED": "1"]) {
                $1
            }
        )
        defer { _ = python.killIfRunning() }
        try #require(
            await python.waitForLine(timeout: 60) { $0 == "waiting for the sign-out" } != nil,
            "\(python.lines) \(python.standardError)"
        )

        // An administrator ends the shift through the broker; both apps hear it and finish.
        let signOut = try await daemon.devicectl(as: 0, ["signout"])
        #expect(signOut.status == 0, "\(signOut.stderr)")
        let swiftEnded = await swift.waitForExit(timeout: 60)
        let pythonEnded = await python.waitForExit(timeout: 60)
        try #require(
            swiftEnded && pythonEnded,
            "\(swift.lines) \(swift.standardError) \(python.lines) \(python.standardError)"
        )
        #expect(swift.status == 0 && python.status == 0, "\(swift.standardError) \(python.standardError)")
        #expect(
            swift.lines == [
                "app \(Daemon.scanner) uid \(Daemon.scannerUID)",
                try #require(shown),
                "worker \(worker), token from the cache",
                "secret 4711",
                "secret deleted",
                "waiting for the sign-out",
                "signed out: an administrator signed the worker out",
            ],
            "\(swift.standardError)"
        )
        #expect(
            python.lines == [
                "app \(Daemon.timeclock) uid \(Daemon.timeclockUID)",
                "worker \(worker)",
                "token from the cache",
                "secret 4711",
                "refused: an invalid parameter (secrets are base64)",
                "waiting for the sign-out",
                "signed out: admin",
            ],
            "\(python.standardError)"
        )
        await daemon.cleanUp()
    }

    /// The README's second way to give an app's user PyPI varlink: its venv commands as written (in a scratch
    /// directory instead of `/opt/kiosk-app`), then the venv's Python run as the timeclock's uid imports it.
    @Test(.tags(.integration)) func theReadmesVenvGivesTheAppsUserAnImportableVarlink() async throws {
        let scratch = URL(fileURLWithPath: "/tmp/readme-venv-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(
            at: scratch,
            withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o755]
        )
        defer { try? FileManager.default.removeItem(at: scratch) }
        let commands = try ReadmeBlocks.block("python-venv").replacingOccurrences(
            of: "/opt/kiosk-app",
            with: scratch.path
        )
        let made = try await Command.run(URL(fileURLWithPath: "/bin/bash"), ["-euo", "pipefail", "-c", commands])
        try #require(made.status == 0, "the README's venv commands failed: \(made.stderr)")
        let python = scratch.appendingPathComponent("venv/bin/python").path
        let probe =
            "import varlink, importlib.metadata; print(importlib.metadata.version('varlink'), varlink.Client.__name__)"
        let imported = try await Command.run(
            Daemon.setpriv,
            Daemon.asUser(Daemon.timeclockUID) + [python, "-c", probe]
        )
        #expect(imported.status == 0 && imported.stdout == "31.0.0 Client\n", "\(imported.stdout) \(imported.stderr)")
    }

    /// The README's `Package.swift` for an app, with the README's Swift sample as its main.swift, beside a
    /// link named as the manifest's path dependency (`../sharedmode`) to this checkout: SwiftPM resolves it
    /// and loads the package graph, which refuses a `package:` that is not the dependency's identity.
    /// (Building it would compile SwiftNIO again; this package compiles the sample itself, above.) The scratch
    /// package starts from copies of this package's resolution and checkouts (copies: SwiftPM rewrites its
    /// state in place, so links would change this package's): fresh checkouts took 40–90 s here, this ~10 s.
    @Test(.tags(.integration)) func thePackageManifestOfAnAppResolvesAgainstACheckoutByPath() async throws {
        let manifest = try ReadmeBlocks.block("package-swift")
        let dependency = try #require(
            manifest.firstMatch(of: /\.package\(path: "([^"]+)"\)/)?.1,
            "no path dependency in \(manifest)"
        )
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "readme-package-\(UUID().uuidString.prefix(8))"
        )
        defer { try? FileManager.default.removeItem(at: scratch) }
        let app = scratch.appendingPathComponent("kiosk-app")
        let sources = app.appendingPathComponent("Sources/KioskApp")
        try FileManager.default.createDirectory(at: sources, withIntermediateDirectories: true)
        try Data(manifest.utf8).write(to: app.appendingPathComponent("Package.swift"))
        try Data(try ReadmeBlocks.block("swift-app").utf8).write(to: sources.appendingPathComponent("main.swift"))
        let checkout = app.appendingPathComponent(String(dependency)).standardizedFileURL
        try FileManager.default.createSymbolicLink(at: checkout, withDestinationURL: ReadmeBlocks.packageRoot)
        let resolved = ReadmeBlocks.packageRoot.appendingPathComponent("Package.resolved")
        if FileManager.default.fileExists(atPath: resolved.path) {
            try FileManager.default.copyItem(at: resolved, to: app.appendingPathComponent("Package.resolved"))
        }
        // The build directory: the products' (`.build/<triple>/debug`) grandparent.
        let build = DevicectlRunner.productsDirectory.deletingLastPathComponent().deletingLastPathComponent()
        let state = ["checkouts", "workspace-state.json"].map { build.appendingPathComponent($0).path }
        if state.allSatisfy(FileManager.default.fileExists(atPath:)) {
            let scratchBuild = app.appendingPathComponent(".build")
            try FileManager.default.createDirectory(at: scratchBuild, withIntermediateDirectories: true)
            let copy = try await Command.run(URL(fileURLWithPath: "/bin/cp"), ["-a"] + state + [scratchBuild.path])
            #expect(copy.status == 0, "\(copy.stderr)")
        }
        let graph = try await Command.run(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["swift", "package", "--package-path", app.path, "show-dependencies", "--format", "json"]
        )
        #expect(graph.status == 0, "the README's Package.swift does not resolve: \(graph.stderr)")
        let root = try #require(try parseJSON(graph.stdout) as? [String: Any], "\(graph.stdout)")
        let names = ((root["dependencies"] as? [[String: Any]]) ?? []).compactMap { $0["identity"] as? String }
        #expect(names == [checkout.lastPathComponent.lowercased()], "\(names)")
    }
}
