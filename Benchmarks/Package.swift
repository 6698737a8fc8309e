// swift-tools-version:6.1
// The benchmarks of the encrypted store, the audit log, the account manager and the token calls, on
// ordo-one/benchmark (package-benchmark), in a package of their own so that the root package's build and
// tests never compile them (as swift-nio, swift-crypto and swift-certificates keep theirs).
// Run them with `tools/bench store|audit|accounts|tokens|all` from the repository root.
import PackageDescription

/// Strict settings, as the root package's targets have.
let strictSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "benchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        // The root package. Its identity would be the name of the directory it is checked out in (a worktree or
        // CI clone may call it anything), so the products below name it by its manifest name instead.
        .package(name: "SharedDeviceMode", path: ".."),
        // Malloc statistics through the malloc-interposer package (no jemalloc to install). Naming the trait drops
        // the default RuntimeInterposer trait (ARC statistics on Linux with Swift 6.3), whose package the benchmarks
        // do not need: they measure no ARC metric.
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
    ],
    targets: [
        // Scratch directories, fixture slots and failures shared by the benchmark targets (no timing, no statistics:
        // package-benchmark measures).
        .target(
            name: "BenchmarkFixtures",
            swiftSettings: strictSettings + [.enableUpcomingFeature("InternalImportsByDefault")]
        ),
        // A provisioned shared-mode device with many apps and locally built token responses, for the account
        // benchmarks and broker-load's sign-out profiling mode.
        .target(
            name: "AccountFixtures",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "KeychainStore", package: "SharedDeviceMode"),
                .product(name: "SharedDevice", package: "SharedDeviceMode"),
            ],
            swiftSettings: strictSettings + [.enableUpcomingFeature("InternalImportsByDefault")]
        ),
        // The store benchmark's baselines in C: the sqlite3 C API on the system SQLite (the floor of one indexed
        // lookup) and SQLCipher 3.4 loaded with dlopen (libsqlcipher0; its sqlite3_* symbols kept apart).
        // The crypto of one encrypted point read (two keyed BLAKE2b, one XChaCha20-Poly1305 open) from C, for the
        // store benchmark's breakdown.
        .target(
            name: "CryptoBaselines",
            linkerSettings: [.linkedLibrary("sodium")]
        ),
        .target(
            name: "SQLiteBaselines",
            linkerSettings: [.linkedLibrary("sqlite3"), .linkedLibrary("dl")]
        ),
        // Point reads of the encrypted store against a plain SQLite table, adds with synchronous FULL and NORMAL.
        .executableTarget(
            name: "StoreBenchmarks",
            dependencies: [
                "BenchmarkFixtures",
                "CryptoBaselines",
                "SQLiteBaselines",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "KeychainStore", package: "SharedDeviceMode"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Benchmarks/StoreBenchmarks",
            swiftSettings: strictSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Audit log appends (own transaction, signed checkpoint, inside a transaction) and verify throughput.
        .executableTarget(
            name: "AuditBenchmarks",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "KeychainStore", package: "SharedDeviceMode"),
                .product(name: "SharedDevice", package: "SharedDeviceMode"),
            ],
            path: "Benchmarks/AuditBenchmarks",
            swiftSettings: strictSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Global sign-out, currentAccount and the account change event between two store objects.
        .executableTarget(
            name: "AccountBenchmarks",
            dependencies: [
                "AccountFixtures",
                "BenchmarkFixtures",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "KeychainStore", package: "SharedDeviceMode"),
                .product(name: "SharedDevice", package: "SharedDeviceMode"),
            ],
            path: "Benchmarks/AccountBenchmarks",
            swiftSettings: strictSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // An app's token calls against the local identity provider (tools/bench tokens starts it on port 4596).
        .executableTarget(
            name: "TokenBenchmarks",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "KeychainStore", package: "SharedDeviceMode"),
                .product(name: "SharedDevice", package: "SharedDeviceMode"),
                .product(name: "IdentityClient", package: "SharedDeviceMode"),
            ],
            path: "Benchmarks/TokenBenchmarks",
            swiftSettings: strictSettings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // The broker daemon's benchmark driver (tools/bench broker): silent tokens and current account in-process
        // and through deviced, load from several client processes, time to the first reply, the codec of one call
        // alone, refusals, new connections and hostile callers. VarlinkServer for the server's limits, VarlinkNIO and
        // NIOCore for the server's framing on a ByteBuffer.
        .executableTarget(
            name: "broker-load",
            dependencies: [
                "AccountFixtures",
                .product(name: "DeviceBroker", package: "SharedDeviceMode"),
                .product(name: "KeychainStore", package: "SharedDeviceMode"),
                .product(name: "SharedDevice", package: "SharedDeviceMode"),
                .product(name: "Varlink", package: "SharedDeviceMode"),
                .product(name: "VarlinkServer", package: "SharedDeviceMode"),
                .product(name: "VarlinkNIO", package: "SharedDeviceMode"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "BrokerContract", package: "SharedDeviceMode"),
                .product(name: "SharedDeviceClient", package: "SharedDeviceMode"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
    ]
)
