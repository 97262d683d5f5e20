import ArgumentParser

/// `apns-relay bench`: benchmarks that print a ratio against a reference measured in the same run.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmarks, each against a reference measured in the same run.",
        subcommands: [TransportBenchCommand.self, AuditBenchCommand.self]
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
