// swift-tools-version: 6.2
//
// apns-relay: an observable relay between application backends and APNs.
// Module boundaries and what each module may import: docs/architecture.md.

import PackageDescription

let strictSwift: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "apns-relay",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        // The relay's parts run as lifecycle Services in one ServiceGroup:
        // signals, the drain's order and its bound (RelayServer/Lifecycle).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        // MARK: C interop (headers, module maps and tiny shims only)

        .systemLibrary(
            name: "CNGHTTP2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // OpenSSL, libmicrohttpd and zlib need C shims: their APIs use macros
        // (SSL_set_tlsext_host_name, deflateInit2) or C variadics
        // (MHD_start_daemon) that Swift cannot call.
        .target(
            name: "COpenSSL",
            linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]
        ),
        .target(
            name: "CMicroHTTPD",
            linkerSettings: [.linkedLibrary("microhttpd")]
        ),
        .target(
            name: "CZlib",
            linkerSettings: [.linkedLibrary("z")]
        ),
        // Before main: a closed standard descriptor reopened on /dev/null.
        .target(name: "CProcess"),

        // MARK: zlib behind one fence (CRC-32, gzip, version), for Audit and HTTPServer

        .target(name: "Zlib", dependencies: ["CZlib"], swiftSettings: strictSwift),

        // MARK: Pure-logic core

        .target(name: "RelayJSON", swiftSettings: strictSwift),
        // Unix time and RFC 3339, hex, Duration in seconds, the HTTP header
        // type and W3C traceparent: one owner for each, Foundation-free.
        // Instrumentation only for the Injector/Extractor protocols
        // (Foundation-free, already a dependency of everything that traces).
        .target(
            name: "RelayBasics",
            dependencies: [.product(name: "Instrumentation", package: "swift-distributed-tracing")],
            swiftSettings: strictSwift
        ),
        .target(name: "Surfaces", dependencies: ["RelayJSON", "RelayBasics"], swiftSettings: strictSwift),
        .target(name: "APNs", dependencies: ["RelayJSON", "RelayBasics", "COpenSSL"], swiftSettings: strictSwift),
        // Checks provider tokens the way APNs does, for the mock APNs and for
        // the HTTP/2 APNs ingress. Apart from APNs' signing code on purpose:
        // a verifier that shared the signer's logic would pass its mistakes.
        .target(name: "ProviderTokens", dependencies: ["RelayJSON", "RelayBasics", "COpenSSL"], swiftSettings: strictSwift),

        // MARK: HTTP/2 transport (knows nothing about APNs)

        .target(name: "HTTP2", dependencies: ["CNGHTTP2", "COpenSSL", "RelayBasics"], swiftSettings: strictSwift),

        // MARK: The send pipeline

        .target(
            name: "Relay",
            dependencies: [
                "APNs", "Surfaces", "RelayJSON", "RelayBasics", "HTTP2",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSwift
        ),

        // MARK: The audit log

        .target(
            name: "Audit",
            dependencies: [
                "CLibPQ", "Zlib", "Relay", "APNs", "RelayJSON", "RelayBasics", .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSwift),

        // MARK: HTTP serving (metrics and the ingress)

        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD", "Zlib", "RelayBasics"], swiftSettings: strictSwift),

        // MARK: Observability

        .target(
            name: "Telemetry",
            dependencies: [
                "Relay", "APNs", "RelayBasics", "HTTPServer",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSwift
        ),

        // MARK: The backend-facing API

        .target(
            name: "Ingress",
            dependencies: [
                "HTTPServer", "Relay", "APNs", "ProviderTokens", "RelayJSON", "RelayBasics", "Surfaces",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSwift
        ),

        // MARK: The assembled server (configuration file, wiring, drain)
        // Not in DESIGN.md's table: `serve`, `demo` and the end-to-end tests
        // need the same wiring, so it lives in a library instead of the executable.

        .target(
            name: "RelayServer",
            dependencies: [
                "Ingress", "Relay", "APNs", "HTTP2", "HTTPServer", "Telemetry", "Audit", "RelayJSON", "RelayBasics",
                .product(name: "Yams", package: "Yams"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSwift
        ),

        // MARK: Mock APNs
        // Verifies provider tokens with ProviderTokens (its own OpenSSL calls) rather
        // than the relay's signing code: a stand-in must not share the client's logic.
        .target(name: "MockAPNs", dependencies: ["APNs", "ProviderTokens", "RelayJSON", "RelayBasics", "HTTP2"], swiftSettings: strictSwift),

        // MARK: The command line

        .executableTarget(
            name: "apns-relay",
            dependencies: [
                "APNs", "Surfaces", "RelayJSON", "HTTP2", "Relay", "MockAPNs", "Telemetry", "Audit", "Ingress", "RelayServer",
                "RelayBasics", "CProcess",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSwift
        ),

        // MARK: Tests

        // Shared test infrastructure: an independent JWT signer and an
        // in-memory transport backed by the mock APNs engine.
        .target(
            name: "TestSupport",
            dependencies: ["Relay", "RelayBasics", "MockAPNs", "APNs", "RelayJSON", "HTTP2"],
            path: "Tests/TestSupport",
            swiftSettings: strictSwift
        ),

        .testTarget(name: "RelayJSONTests", dependencies: ["RelayJSON"], swiftSettings: strictSwift),
        .testTarget(
            name: "RelayBasicsTests",
            dependencies: ["RelayBasics", .product(name: "Tracing", package: "swift-distributed-tracing")],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "SurfacesTests",
            dependencies: ["Surfaces", "RelayJSON", "TestSupport"],
            resources: [.copy("Fixtures")],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "APNsTests",
            dependencies: ["APNs", "RelayJSON", "RelayBasics", "TestSupport"],
            resources: [.copy("Fixtures")],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "RelayTests",
            dependencies: [
                "Relay", "APNs", "RelayJSON", "MockAPNs", "Telemetry", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "TelemetryTests",
            dependencies: [
                "Telemetry", "Relay", "RelayJSON", "RelayBasics", "APNs", "Surfaces", "HTTPServer", "MockAPNs", "HTTP2", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strictSwift
        ),
        .testTarget(
            name: "AuditTests", dependencies: ["Audit", "Relay", "APNs", "RelayJSON", "RelayBasics", "TestSupport"], swiftSettings: strictSwift),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "RelayServer", "Ingress", "Relay", "APNs", "RelayJSON", "MockAPNs", "HTTP2", "HTTPServer", "Audit", "TestSupport",
            ],
            swiftSettings: strictSwift
        ),
        .testTarget(name: "HTTP2Tests", dependencies: ["HTTP2", "RelayJSON", "TestSupport"], swiftSettings: strictSwift),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "TestSupport"], swiftSettings: strictSwift),
        // The ingress' steps and route table, and the assembled server's parts, without the whole stack.
        .testTarget(
            name: "IngressTests",
            dependencies: ["Ingress", "HTTPServer", "APNs", "RelayBasics", "RelayJSON", "Telemetry", "TestSupport", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strictSwift),
        .testTarget(
            name: "RelayServerTests",
            dependencies: [
                "RelayServer", "Audit", "APNs", "Telemetry", "HTTP2", "TestSupport",
                // Stand-in parts (a Service that fails) for the lifecycle tests.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSwift),
        .testTarget(name: "ZlibTests", dependencies: ["Zlib"], swiftSettings: strictSwift),
        .testTarget(
            name: "MockAPNsTests", dependencies: ["MockAPNs", "ProviderTokens", "APNs", "RelayJSON", "RelayBasics", "TestSupport"],
            swiftSettings: strictSwift),
        .testTarget(
            name: "CInteropTests",
            dependencies: ["CNGHTTP2", "COpenSSL", "CLibPQ", "CMicroHTTPD", "CZlib", "TestSupport"],
            swiftSettings: strictSwift
        ),
    ]
)
