import APNs
import ArgumentParser

/// `apns-relay bench`: benchmarks that print a ratio against a reference measured in the same run.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmarks, each against a reference measured in the same run.",
        subcommands: [TransportBenchCommand.self, AuditBenchCommand.self, IngressBenchCommand.self, LoadBenchCommand.self, TracingBenchCommand.self, LogLineBenchCommand.self]
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
    @Option(help: "Use a mock APNs already running in another process (apns-relay mock-apns) on this port of 127.0.0.1, instead of one in this process; --delay-ms is then the mock's own.")
    var mockPort: Int?
    @Option(help: "With --mock-port: the mock's certificate (its trusted CA).") var caFile: String?
    @Option(help: "With --mock-port: a provider key (.p8) the mock accepts.") var keyFile: String?
    @Option(help: "With --mock-port: that key's id.") var keyID = "BENCHKEY01"
    @Option(help: "With --mock-port: that key's team.") var teamID = "BENCHTEAM1"
    @Option(help: "With --mock-port: the apns-topic to send.") var bundleID = "com.example.bench"

    func validate() throws {
        if mockPort != nil, caFile == nil || keyFile == nil { throw ValidationError("--mock-port needs --ca-file and --key-file") }
    }

    func run() async throws {
        var benchmark = TransportBenchmark(
            requests: requests, connections: connections, streams: streams, delayMilliseconds: delayMs, runH2load: !noH2load)
        if let mockPort, let caFile, let keyFile {
            let credentials = try ProviderCredentials(keyID: keyID, teamID: teamID, key: SigningKey(contentsOfFile: keyFile))
            benchmark.external = (mockPort, caFile, credentials, bundleID)
        }
        let report = try await benchmark.run()
        print(report)
    }
}

/// `apns-relay bench audit`: the audit writer against `psql \copy` of the same rows.
struct AuditBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Rows/s through the audit writer against psql \\copy of the same rows into the same table (truncates apns_audit).")

    @Option(help: "Rows per run.") var rows = 200_000
    @Option(help: "Rows per COPY: the writer's batch size, and the size of psql's \\copy files.") var batchSize = 2000
    @Option(help: ArgumentHelp(
        "Only write --rows COPY lines, as the writer encodes them, to this file (and their column list to stdout); load nothing.",
        discussion: "Successful single sends 100 µs apart with varied latencies: the rows scripts/audit-pg-cost loads to measure Postgres' CPU per row."))
    var rowsOut: String?
    @OptionGroup var database: DatabaseOptions

    func run() async throws {
        if let rowsOut {
            print(try AuditBenchmark.writeRows(rows, to: rowsOut))
            return
        }
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
            first) or, without one, to a spool directory. With a database it also runs the closed loop with an \
            Idempotency-Key on every send, for the cost of a key.
            """)

    @Option(help: "Sends per closed-loop run.") var requests = 50_000
    @Option(help: "Keep-alive client connections (one thread each).") var connections = 32
    @Option(help: "Audit database (libpq URL); default: spool only.") var databaseURL: String?

    func run() async throws {
        print(try await IngressBenchmark(requests: requests, connections: connections, databaseURL: databaseURL).run())
    }
}

/// `apns-relay bench load`: the built-in load generator against a relay in another process.
struct LoadBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Drive a running relay (apns-relay serve) with sends from keep-alive HTTP/1.1 connections and print one line of figures.",
        discussion: """
            Each send goes to a different token. Without --batch-size, one send per POST /v1/send; with it, \
            batches of that many items through POST /v1/send/batch. Prints `load: requests=… sends=… succeeded=… \
            failed_requests=… seconds=… sends_per_s=… p50_ms=… p99_ms=…` (latency per request, a whole batch for \
            the batch route). Each answer is read whole: a status other than 200 counts as a failed request (a \
            connection that fails before the answer is reconnected and the request sent once more first); a batch's \
            succeeded sends are its summary's. scripts/bench runs it beside wrk and reads the relay's CPU time around it.
            """)

    @Option(help: "The relay's ingress port on 127.0.0.1.") var port: UInt16
    @Option(help: "The API key (sent as Authorization: Bearer).") var apiKey: String
    @Option(help: "The app name the sends are for.") var app = DemoEnvironment.app
    @Option(help: "Keep-alive connections, one request in flight on each (all on one thread's poll loop).") var connections = 8
    @Option(help: "Sends in all (rounded up to whole batches).") var sends = 20_000
    @Option(help: "Items per batch through /v1/send/batch (0: single sends through /v1/send).") var batchSize = 0
    @Option(help: "0: an alert from a Live Activity snapshot; n: a raw alert whose APNs payload is n bytes.") var payloadBytes = 0
    @Option(help: "The first token's number (runs that must not repeat tokens start apart).") var tokenOffset = 0

    func validate() throws {
        guard connections >= 1 else { throw ValidationError("--connections must be at least 1") }
        guard sends >= 1 else { throw ValidationError("--sends must be at least 1") }
        guard (0...10_000).contains(batchSize) else { throw ValidationError("--batch-size must be 0 to 10000") }
        guard (0...4096).contains(payloadBytes) else { throw ValidationError("--payload-bytes must be 0 to 4096 (APNs' limit)") }
    }

    func run() async throws {
        printUnbuffered(await LoadGenerator(options: self).run().line)
    }
}
