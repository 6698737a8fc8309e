// swift-tools-version:6.1
import PackageDescription

/// Strict settings on every target, as swift-log does.
let strictSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "SharedDeviceMode",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "KeychainStore", targets: ["KeychainStore"]),
        .library(name: "IdentityClient", targets: ["IdentityClient"]),
        .library(name: "SharedDevice", targets: ["SharedDevice"]),
        .library(name: "Varlink", targets: ["Varlink"]),
        .library(name: "VarlinkServer", targets: ["VarlinkServer"]),
        // varlink's framing on SwiftNIO's buffers, as the server and the app's client read messages (for the broker's
        // benchmark of the codec alone).
        .library(name: "VarlinkNIO", targets: ["VarlinkNIO"]),
        .library(name: "DeviceBroker", targets: ["DeviceBroker"]),
        .library(name: "BrokerContract", targets: ["BrokerContract"]),
        .library(name: "SharedDeviceClient", targets: ["SharedDeviceClient"]),
        .executable(name: "varlink-generate", targets: ["varlink-generate"]),
        .executable(name: "devicectl", targets: ["devicectl"]),
        .executable(name: "deviced", targets: ["deviced"]),
        .executable(name: "msal-bridge", targets: ["msal-bridge"]),
        // The PAM module's helper, installed as /usr/libexec/sharedmode/pam-helper.
        .executable(name: "sharedmode-pam-helper", targets: ["sharedmode-pam-helper"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.1.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // sd-bus (libsystemd), the D-Bus library of a systemd system: the MSAL bridge's session-bus service.
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // sqlite3_db_config (variadic in C): a store whose key check failed is closed without a checkpoint.
        .target(name: "CSQLiteControl", linkerSettings: [.linkedLibrary("sqlite3")]),
        // Reaching a directory safely (every component of its path owned by root or the caller, none writable
        // by others without the sticky bit) and using its files by descriptor: the socket's and the store's.
        .target(
            name: "PathSafety",
            dependencies: [.product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: strictSettings
        ),
        // Which app of its user a process is: the Flatpak sandbox it runs in, read from its root and pinned
        // to it by a pidfd (xdg-desktop-portal's rule); a process handed over by pidfd (the MSAL bridge's caller).
        .target(name: "ProcessSandbox", dependencies: ["CProcessControl"], swiftSettings: strictSettings),
        .target(
            name: "KeychainStore",
            dependencies: [
                "CSodium",
                "PathSafety",
                "CSQLiteControl",
                .product(name: "GRDB", package: "GRDB.swift"),
                // The point read steps GRDB's cached statement through the sqlite3 C API (GRDB's own system library).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),
        // prctl and syscall (variadic in C): deviced's memory hygiene, pidfd_open and pidfd_getfd.
        .target(name: "CProcessControl"),
        // libcurl behind dlopen, for IdentityClient's CurlTransport: nothing loads it until a request goes out.
        .target(
            name: "CCurl",
            linkerSettings: [.linkedLibrary("dl")]
        ),
        .target(
            name: "IdentityClient",
            dependencies: [
                "CCurl",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "SharedDevice",
            dependencies: [
                "KeychainStore",
                "PathSafety",
                "IdentityClient",
                "ProcessSandbox",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),
        // The login manager (logind on the system bus, through sd-bus): end, kill or lock a worker's login
        // session, and hear when one is removed. The broker sees only the `LoginSessionControl` protocol.
        .target(
            name: "LoginSessions",
            dependencies: ["CSystemd", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strictSettings
        ),
        // The varlink codec (framing, calls, replies, the standard errors) and a blocking client over a
        // Unix socket. No dependencies, so every client (devicectl, apps) can link it cheaply.
        .target(
            name: "Varlink",
            swiftSettings: strictSettings
        ),
        // The varlink framing on SwiftNIO's ByteBuffer, shared by the server and the app's client: messages
        // found where they lie in the connection's buffer, the same limit and error as Varlink's decoder.
        .target(
            name: "VarlinkNIO",
            dependencies: [
                "Varlink",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // The varlink IDL parser and the Swift contract generator (types, methods, errors, the method enum).
        .target(
            name: "VarlinkGenerator",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "varlink-generate",
            dependencies: ["VarlinkGenerator"],
            swiftSettings: strictSettings
        ),
        // The broker's wire contract, generated from org.sharedmode.Broker1.varlink (which it embeds
        // verbatim for GetInterfaceDescription): what the broker serves and its clients call.
        .target(
            name: "BrokerContract",
            dependencies: ["Varlink"],
            exclude: ["broker-api.md"],
            resources: [.embedInCode("org.sharedmode.Broker1.varlink")],
            swiftSettings: strictSettings
        ),
        // Where the executables find the store and the broker (options, then environment, then the
        // system's defaults); libraries are handed the result.
        .target(
            name: "DeviceLocations",
            dependencies: ["BrokerContract"],
            swiftSettings: strictSettings
        ),
        // What an app links to reach the broker: the async, MSAL-shaped client over the contract. No store,
        // no crypto, no identity client: the broker holds all of that.
        .target(
            name: "SharedDeviceClient",
            dependencies: [
                "BrokerContract",
                "Varlink",
                "VarlinkNIO",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // A varlink server on SwiftNIO: Unix socket (path or inherited from systemd), peer credentials,
        // message and connection limits, org.varlink.service; a ServiceLifecycle service that quiesces on
        // shutdown, its handler's calls on threads of their own. Knows nothing of devices or keychains.
        .target(
            name: "VarlinkServer",
            dependencies: [
                "Varlink",
                "ProcessSandbox",
                "VarlinkNIO",
                "PathSafety",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        // The broker's service logic: the org.sharedmode.Broker1 interface's typed handlers, callers
        // mapped to apps by uid, every method on top of SharedDevice.
        .target(
            name: "DeviceBroker",
            dependencies: [
                "Varlink",
                "PathSafety",
                "BrokerContract",
                "KeychainStore",
                "IdentityClient",
                "SharedDevice",
                "LoginSessions",
                "ProcessSandbox",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),
        // The broker behind a VarlinkServer: its calls, connection slots, registry and service info, as the
        // daemon serves them and the in-process client tests do.
        .target(
            name: "BrokerServer",
            dependencies: [
                "BrokerContract", "DeviceBroker", "ProcessSandbox", "SharedDevice", "Varlink", "VarlinkServer",
            ],
            swiftSettings: strictSettings
        ),
        // The broker daemon: wires DeviceBroker to VarlinkServer, systemd readiness and graceful stop.
        .executableTarget(
            name: "deviced",
            dependencies: [
                "BrokerServer",
                "CProcessControl",
                "PathSafety",
                "DeviceBroker",
                "LoginSessions",
                "ProcessSandbox",
                "DeviceLocations",
                "BrokerContract",
                "VarlinkServer",
                "KeychainStore",
                "SharedDevice",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // Microsoft's Linux broker protocol (com.microsoft.identity.broker1) answered from deviced: the calls
        // MSALRuntime makes, mapped onto SharedDeviceClient; the session-bus service on sd-bus; the Secret
        // Service clean-up at a sign-out.
        .target(
            name: "MSALBridge",
            dependencies: [
                "CSystemd",
                "CProcessControl",
                "ProcessSandbox",
                "SharedDeviceClient",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // The session bridge: D-Bus-activated on an app user's session bus, it owns
        // com.microsoft.identity.broker1 and forwards each call to deviced as that user.
        .executableTarget(
            name: "msal-bridge",
            dependencies: [
                "MSALBridge",
                "DeviceLocations",
                "SharedDeviceClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // The PAM module pam_sharedmode (C, loaded into greeters: no Swift runtime, no threads). SwiftPM
        // compiles it here as a check; the module itself is built by tools/build-pam (cc -shared).
        .target(
            name: "PamSharedMode",
            path: "Sources/PamSharedMode",
            linkerSettings: [.linkedLibrary("pam")]
        ),
        // The module's helper: the PAM conversation relayed from the module, varlink to deviced (the blocking
        // client only: no NIO, no store).
        // A session user's fresh home (emptied without following a link, filled from /etc/skel), for the helper.
        .target(
            name: "PamHomeReset",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "sharedmode-pam-helper",
            dependencies: ["BrokerContract", "PamHomeReset", "Varlink"],
            path: "Sources/pam-helper",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "devicectl",
            dependencies: [
                "BrokerContract",
                "DeviceLocations",
                "SharedDeviceClient",
                "Varlink",
                "KeychainStore",
                "IdentityClient",
                "SharedDevice",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "KeychainStoreTests",
            dependencies: [
                "ProcessTestSupport",
                "TestTags",
                "StoreTestSupport",
                "KeychainStore",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "SharedDeviceTests",
            dependencies: [
                "BrokerAPIPageSupport",
                "BrokerContract",
                "BrokerServer",
                "LoginSessions",
                "VarlinkServer",
                "ProcessTestSupport",
                "PamTestSupport",
                "TestTags",
                "StoreTestSupport",
                "SharedDevice",
                "DeviceBroker",
                "Varlink",
                "KeychainStore",
                "IdentityClient",
                "IdentityTestSupport",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // What the store's and the device's suites share: a scratch state directory, a fake clock, raw SQL
        // access to a store's file. Used by tests only.
        .target(
            name: "StoreTestSupport",
            dependencies: [
                "KeychainStore",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Tests/StoreTestSupport",
            swiftSettings: strictSettings
        ),
        // broker-api.md's recorded exchanges read from the page, and the rule that compares a recorded reply
        // with the wire's: the page replays of DevicectlTests (a live deviced) and SharedDeviceTests (native
        // sign-in, against the scripted Microsoft stand-in). Used by tests only.
        .target(
            name: "BrokerAPIPageSupport",
            path: "Tests/BrokerAPIPageSupport",
            swiftSettings: strictSettings
        ),
        // The tags of the test suites (integration, needsRoot, needsIdentityProvider), defined once.
        .target(
            name: "TestTags",
            path: "Tests/TestTags",
            swiftSettings: strictSettings
        ),
        // The PAM module as the tests drive it (built by tools/build-pam, a PAM service of the test's, pamtester
        // or Tests/PamHost). Used by tests only.
        .target(
            name: "PamTestSupport",
            dependencies: ["ProcessTestSupport"],
            path: "Tests/PamTestSupport",
            swiftSettings: strictSettings
        ),
        // The child-process plumbing of the multi-process, SIGKILL and CLI tests. Used by tests only.
        .target(
            name: "ProcessTestSupport",
            dependencies: [
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            path: "Tests/ProcessTestSupport",
            swiftSettings: strictSettings
        ),
        // Test helper processes (multi-process and SIGKILL tests), built by `swift build --build-tests`.
        // keychain-worker hammers one store; device-worker provisions and deprovisions in a loop;
        // account-worker signs workers in and out and waits for account changes.
        .executableTarget(
            name: "keychain-worker",
            dependencies: ["KeychainStore", "ProcessTestSupport"],
            path: "Tests/Workers/keychain-worker",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "device-worker",
            dependencies: ["SharedDevice", "KeychainStore", "ProcessTestSupport"],
            path: "Tests/Workers/device-worker",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "account-worker",
            dependencies: ["SharedDevice", "KeychainStore", "IdentityClient", "ProcessTestSupport"],
            path: "Tests/Workers/account-worker",
            swiftSettings: strictSettings
        ),
        // Starts a child the tests' way and dies by SIGKILL: the child must die with it (ChildWatchdogTests).
        .executableTarget(
            name: "watchdog-probe",
            dependencies: ["ProcessTestSupport"],
            path: "Tests/Workers/watchdog-probe",
            swiftSettings: strictSettings
        ),
        // An app that links only SharedDeviceClient (the thin-client tests run it under the app's uid, and
        // check that its link holds no store, crypto or curl symbol).
        .executableTarget(
            name: "thin-app",
            dependencies: [
                "SharedDeviceClient",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/Workers/thin-app",
            swiftSettings: strictSettings
        ),
        // The README's Swift app sample, compiled as an app would compile it (Swift 6 mode, no stricter
        // settings): ReadmeSampleTests checks its main.swift is the README's block, byte for byte, and runs it
        // under an app's uid against a real broker.
        .executableTarget(
            name: "readme-kiosk-app",
            dependencies: ["SharedDeviceClient"],
            path: "Tests/Workers/readme-kiosk-app",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Every method and app-facing error of the broker's interface through the generated contract, run by
        // the conformance test under an app's uid.
        .executableTarget(
            name: "broker-conformance",
            dependencies: [
                "SharedDeviceClient",
                "BrokerContract",
                "Varlink",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/Workers/broker-conformance",
            swiftSettings: strictSettings
        ),
        // Test doubles shared by the test targets: the scripted stand-in for Microsoft's endpoints and
        // claim sets for signing test ID tokens. Used by tests only.
        .target(
            name: "IdentityTestSupport",
            dependencies: [
                "IdentityClient",
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            path: "Tests/IdentityTestSupport",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "IdentityClientTests",
            dependencies: [
                "IdentityClient",
                "ProcessTestSupport",
                "IdentityTestSupport",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "VarlinkGeneratorTests",
            dependencies: ["VarlinkGenerator", "BrokerContract", "Varlink"],
            exclude: ["org.example.shapes.varlink"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DeviceBrokerTests",
            dependencies: [
                "DeviceBroker",
                "SharedDevice",
                "KeychainStore",
                "StoreTestSupport",
                "Varlink",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "VarlinkServerTests",
            dependencies: [
                "VarlinkServer",
                "PathSafety",
                "Varlink",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "PathSafetyTests",
            dependencies: ["PathSafety", "TestTags", .product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: strictSettings
        ),
        // logind's client: a missing system bus fails clearly; in a booted systemd, the real logind.
        .testTarget(
            name: "LoginSessionsTests",
            dependencies: ["LoginSessions", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DeviceLocationsTests",
            dependencies: ["DeviceLocations"],
            swiftSettings: strictSettings
        ),
        // The client against the real broker and server in the test's process (the caller's uid injected).
        .testTarget(
            name: "SharedDeviceClientTests",
            dependencies: [
                "SharedDeviceClient",
                "BrokerServer",
                "DeviceBroker",
                "SharedDevice",
                "KeychainStore",
                "StoreTestSupport",
                "VarlinkServer",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "MSALBridgeTests",
            dependencies: ["MSALBridge", "SharedDeviceClient"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "VarlinkNIOTests",
            dependencies: [
                "VarlinkNIO",
                "Varlink",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "VarlinkTests",
            dependencies: ["Varlink"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "PamHomeResetTests",
            dependencies: ["PamHomeReset", "TestTags"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DevicectlTests",
            dependencies: [
                "ProcessTestSupport", "PamTestSupport", "IdentityClient", "TestTags", "BrokerAPIPageSupport",
            ],
            exclude: ["Help"],  // golden `--help` files, read by HelpGoldenTests from the source tree
            swiftSettings: strictSettings
        ),
    ]
)
