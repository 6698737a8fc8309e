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
        .executable(name: "devicectl", targets: ["devicectl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.1.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        .target(
            name: "KeychainStore",
            dependencies: [
                "CSodium",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "IdentityClient",
            dependencies: [
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
                "IdentityClient",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),
        // The varlink codec (framing, calls, replies, the standard errors); the broker daemon's server builds on it.
        .target(
            name: "Varlink",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "devicectl",
            dependencies: [
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
                "KeychainStore",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "SharedDeviceTests",
            dependencies: [
                "ProcessTestSupport",
                "SharedDevice",
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
                "IdentityTestSupport",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "VarlinkTests",
            dependencies: ["Varlink"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "DevicectlTests",
            dependencies: ["ProcessTestSupport", "IdentityClient"],
            swiftSettings: strictSettings
        ),
    ]
)
