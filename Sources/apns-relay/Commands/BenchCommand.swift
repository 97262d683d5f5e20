import ArgumentParser

/// `apns-relay bench`: benchmarks that print a ratio against a reference measured in the same run.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmarks, each against a reference measured in the same run.",
        subcommands: [TransportBenchCommand.self, AuditBenchCommand.self, IngressBenchCommand.self, TracingBenchCommand.self]
    )
}

/// `apns-relay bench transport`: our HTTP/2 client against h2load, same mock, same shape.
struct TransportBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transport",
        abstract: "Requests/s of the relay's HTTP/2 client against h2load's, on the same mock APNs, with the same connections and streams.",
        discussion: """
            Runs the mock APNs on loopback, then sends --requests alert pushes (JWT-signed, validated by the mock) \
            with our client and with h2load, and prints both rates, their ratio, and our p50/p99 latency. \
            With --delay-ms the mock answers late, and the run is compared with the latency-bound ceiling \
            connections × streams / delay instead.
            """
    )

    @Option(help: "Requests per run.") var requests = 50_000
    @Option(help: "Connections (both clients).") var connections = 2
    @Option(help: "Concurrent streams per connection (both clients).") var streams = 100
    @Option(help: "Mock answer delay in milliseconds (0: throughput run).") var delayMs = 0
    @Flag(help: "Skip h2load (when it is not installed).") var noH2load = false

    func run() async throws {
        let report = try await TransportBenchmark(
            requests: requests, connections: connections, streams: streams, delayMilliseconds: delayMs, runH2load: !noH2load
        ).run()
        print(report)
    }
}

/// `apns-relay bench audit`: the audit writer against `psql \copy` of the same rows.
struct AuditBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Rows/s through the audit writer against psql \\copy of the same rows into the same table (truncates apns_audit).")

    @Option(help: "Rows per run.") var rows = 200_000
    @Option(help: "Writer batch size (rows per COPY).") var batchSize = 2000
    @OptionGroup var database: DatabaseOptions

    func run() async throws {
        print(try await AuditBenchmark(rows: rows, conninfo: database.conninfo, batchSize: batchSize).run())
    }
}

/// `apns-relay bench ingress`: sends/s end to end through the HTTP API.
struct IngressBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingress",
        abstract: "End-to-end sends/s through the ingress (audit on), the latency it adds over a direct relay call at half that load, and audit on vs off.",
        discussion: """
            Starts a mock APNs and the relay on loopback (as the demo does) and drives POST /v1/send from \
            keep-alive HTTP/1.1 clients on threads of their own. The audit goes to --database-url (migrated \
            first) or, without one, to a spool directory.
            """)

    @Option(help: "Sends per closed-loop run.") var requests = 50_000
    @Option(help: "Keep-alive client connections (one thread each).") var connections = 32
    @Option(help: "Audit database (libpq URL); default: spool only.") var databaseURL: String?

    func run() async throws {
        print(try await IngressBenchmark(requests: requests, connections: connections, databaseURL: databaseURL).run())
    }
}
