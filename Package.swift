// swift-tools-version: 6.1
import Foundation
import PackageDescription

/// Every migration, embedded in the binary as a resource of the `Migrations` target.
let migrationFiles =
    ((try? FileManager.default.contentsOfDirectory(atPath: Context.packageDirectory + "/migrations")) ?? [])
    .filter { $0.hasSuffix(".sql") }.sorted()

let package = Package(
    name: "lender",
    platforms: [.macOS(.v15), .iOS(.v17)],
    products: [
        .executable(name: "lender", targets: ["lender"]),
        // The typed Swift client the apps use (docs/CLIENTS.md).
        .library(name: "LenderClient", targets: ["LenderClient"]),
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
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.0"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession.git", from: "1.4.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        // libpq, found through pkg-config (Debian: libpq-dev).
        .systemLibrary(
            name: "CLibPQ",
            path: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // libvips, found through pkg-config (Debian: libvips-dev).
        .systemLibrary(
            name: "CVips",
            path: "Sources/CVips",
            pkgConfig: "vips",
            providers: [.apt(["libvips-dev"])]
        ),
        // libcurl, for SMTP (Debian: libcurl4-openssl-dev): a well-kept client of the
        // protocol, STARTTLS and SMTPS included, rather than one written here.
        .systemLibrary(
            name: "CCurl",
            path: "Sources/CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(name: "CCurlShim", dependencies: ["CCurl"]),
        // E-mail out: messages written as RFC 5322 and MIME, and sent over SMTP.
        .target(
            name: "Mail",
            dependencies: [
                "CCurlShim", .product(name: "NIOPosix", package: "swift-nio"), .product(name: "Mustache", package: "swift-mustache"),
            ],
            resources: [.copy("Templates")]
        ),
        // Fixed-argument C wrappers over libvips' variadic calls, which Swift cannot make.
        .target(name: "CVipsShim", dependencies: ["CVips"]),
        // Photos: checked by decoding, turned upright, stripped of metadata, thumbnailed. No I/O.
        // A child process run with a CPU budget and a deadline (photos are decoded in one).
        .target(name: "CChild"),
        .target(name: "Media", dependencies: ["CVipsShim", "CChild"]),
        // A small, safe Swift face over libpq. Knows nothing of marketplaces.
        .target(
            name: "Postgres",
            dependencies: [
                "CLibPQ",
                "Civil",
                "UUIDs",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Log lines as swift-log's stream handler writes them, metadata set cheaply: `lender`'s logger.
        .target(name: "LineLog", dependencies: [.product(name: "Logging", package: "swift-log")]),
        // The domain, pure: typed IDs, commands, events, one decider per aggregate. No I/O.
        // UUIDs made, written and read without Foundation's sprintf, sscanf and /dev/urandom.
        .target(name: "UUIDs"),
        // Dates of the calendar from days since 1970 and back, in integers.
        .target(name: "Civil"),
        .target(name: "Marketplace", dependencies: ["Civil", "UUIDs"]),
        // Codable values written straight to JSON bytes: the answers and the events' bodies.
        .target(name: "JSONStream", dependencies: ["Civil"]),
        // The append-only log: append with expected versions, read, follow, verify.
        .target(
            name: "EventStore",
            dependencies: [
                "JSONStream",
                "Postgres",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The schema's migrations, built into the binary: `lender migrate` needs no checkout.
        .target(
            name: "Migrations",
            dependencies: ["Postgres"],
            path: "migrations",
            exclude: ["README.md"],
            sources: ["Embedded.swift"],
            resources: migrationFiles.map { .copy($0) }
        ),
        // One registry per aggregate: its stream category, its events' codec, its decider.
        .target(
            name: "Aggregates",
            dependencies: ["EventStore", "Marketplace", "Postgres", "UUIDs"]
        ),
        // The views: how each event changes each view's tables, and every read of them.
        .target(
            name: "Projections",
            dependencies: [
                "Aggregates", "EventStore", "JSONStream", "Marketplace", "Postgres", "UUIDs",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Card fingerprints and the payment processor port, with its sandbox.
        .target(
            name: "Payments",
            dependencies: ["Marketplace", "Postgres", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // The use cases: load, decide, charge, append. What the HTTP layer and the CLI call.
        .target(
            name: "UseCases",
            dependencies: [
                "UUIDs",
                "Aggregates",
                "EventStore",
                "Marketplace",
                "Mail",
                "Media",
                "Payments",
                "Postgres",
                "Projections",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The HTTP gateway: decodes, calls a use case or reads a view, encodes.
        .target(
            name: "Server",
            dependencies: [
                "UUIDs",
                "Aggregates",
                "EventStore",
                "JSONStream",
                "Mail",
                "Marketplace",
                "Media",
                "Postgres",
                "Projections",
                "UseCases",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                // The desk's pages, and webhooks out.
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            resources: [.copy("Resources/openapi.json"), .copy("Resources/Desk")]
        ),
        .executableTarget(
            name: "lender",
            dependencies: [
                "Aggregates",
                "EventStore",
                "LineLog",
                "Mail",
                "Marketplace",
                "Media",
                "Migrations",
                "Payments",
                "Postgres",
                "Projections",
                "Server",
                "UseCases",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The apps' client: generated from the server's OpenAPI document by scripts/generate-client
        // (committed in Generated/), with a bearer token, dates and idempotent retries by hand.
        .target(
            name: "LenderClient",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            exclude: ["openapi-generator-config.yaml"]
        ),
        // Load generators for scripts/bench.
        .executableTarget(
            name: "lender-bench",
            dependencies: [
                "Aggregates",
                "EventStore",
                "Marketplace",
                "Postgres",
                "Projections",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
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
        // The HTTP tests' shared helpers: a server per test, a client that reads typed answers,
        // the `lender` process, and the bodies that have no public type in the server.
        .target(
            name: "ServerTestSupport",
            dependencies: [
                "EventStore",
                "LenderClient",
                "Marketplace",
                "Media",
                "Postgres",
                "Projections",
                "Server",
                "TestSupport",
                "UseCases",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/ServerSupport"
        ),
        .testTarget(
            name: "PostgresTests",
            dependencies: ["Postgres", "TestSupport"]
        ),
        .testTarget(
            name: "MarketplaceTests",
            dependencies: ["Marketplace", "UUIDs"]
        ),
        // Images made in code for the tests: a photo with GPS tags, a decompression bomb, ...
        .target(name: "ImageFixtures", dependencies: ["CVipsShim", "Media"], path: "Tests/ImageFixtures"),
        .testTarget(
            name: "MediaTests",
            dependencies: ["Media", "ImageFixtures"]
        ),
        .testTarget(
            name: "EventStoreTests",
            dependencies: ["EventStore", "Postgres", "TestSupport", .product(name: "Crypto", package: "swift-crypto")],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "LenderClientTests",
            dependencies: [
                "LenderClient",
                "ServerTestSupport",
                "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ]
        ),
        .testTarget(
            name: "JSONStreamTests",
            // JSONValue, the any-value the tape decoder is held to, lives in EventStore.
            dependencies: ["JSONStream", "EventStore"]
        ),
        .testTarget(
            name: "AggregatesTests",
            dependencies: ["Aggregates", "EventStore", "Marketplace"]
        ),
        .testTarget(
            name: "PaymentsTests",
            dependencies: ["Payments", "Marketplace", "Postgres", "TestSupport"]
        ),
        .testTarget(
            name: "ProjectionsTests",
            dependencies: ["Projections", "Aggregates", "EventStore", "Marketplace", "Postgres", "TestSupport"]
        ),
        .testTarget(
            name: "UseCasesTests",
            dependencies: [
                "UseCases", "Aggregates", "EventStore", "Marketplace", "Payments", "Postgres", "Projections", "TestSupport",
            ]
        ),
        .testTarget(
            name: "ServerTests",
            dependencies: [
                "Server",
                "LenderClient",
                "Aggregates",
                "ImageFixtures",
                "LineLog",
                "Mail",
                "Media",
                "Migrations",
                "UseCases",
                "Postgres",
                "EventStore",
                "JSONStream",
                "Marketplace",
                "Payments",
                "Projections",
                "ServerTestSupport",
                "TestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
    ]
)
