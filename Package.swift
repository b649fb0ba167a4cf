// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "lender",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "lender", targets: ["lender"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.0"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        // libpq, found through pkg-config (Debian: libpq-dev).
        .systemLibrary(
            name: "CLibPQ",
            path: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // A small, safe Swift face over libpq. Knows nothing of marketplaces.
        .target(
            name: "Postgres",
            dependencies: [
                "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The domain, pure: typed IDs, commands, events, one decider per aggregate. No I/O.
        .target(name: "Marketplace"),
        // The append-only log: append with expected versions, read, follow, verify.
        .target(
            name: "EventStore",
            dependencies: [
                "Postgres",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The views: how each event changes each view's tables.
        .target(
            name: "Projections",
            dependencies: ["EventStore", "Marketplace", "Postgres"]
        ),
        // Card fingerprints and the payment processor port, with its sandbox.
        .target(
            name: "Payments",
            dependencies: ["Marketplace", "Postgres", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // The HTTP gateway.
        .target(
            name: "Server",
            dependencies: [
                "Postgres",
                "EventStore",
                "Marketplace",
                "Payments",
                "Projections",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            resources: [.copy("Resources/openapi.json")]
        ),
        .executableTarget(
            name: "lender",
            dependencies: [
                "Postgres",
                "EventStore",
                "Marketplace",
                "Payments",
                "Projections",
                "Server",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Load generators for scripts/bench.
        .executableTarget(
            name: "lender-bench",
            dependencies: [
                "EventStore",
                "Marketplace",
                "Postgres",
                "Projections",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Test helpers: a fresh database per test, from the cluster scripts/test starts.
        .target(
            name: "TestSupport",
            dependencies: ["Postgres", .product(name: "Logging", package: "swift-log")],
            path: "Tests/Support"
        ),
        .testTarget(
            name: "PostgresTests",
            dependencies: ["Postgres", "TestSupport"]
        ),
        .testTarget(
            name: "MarketplaceTests",
            dependencies: ["Marketplace"]
        ),
        .testTarget(
            name: "EventStoreTests",
            dependencies: ["EventStore", "Postgres", "TestSupport", .product(name: "Crypto", package: "swift-crypto")],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "ServerTests",
            dependencies: [
                "Server",
                "Postgres",
                "EventStore",
                "Marketplace",
                "Payments",
                "Projections",
                "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ]
        ),
    ]
)
