import Foundation
import Testing
import TestSupport

/// `serve` in front of a Postgres that stops answering without closing
/// anything (a frozen host, a network path that drops packets), played by a
/// ``FreezingTCPProxy`` between the relay and the test's Postgres. Before
/// `audit.postgres_timeout_ms`, the audit writer's COPY waited forever: rows
/// piled up in memory while /metrics said connected and 0 s behind, a keyed
/// send hung, and SIGTERM passed the drain's bound (exit 1).
@Suite("serve with a Postgres that stops answering", .serialized)
struct PostgresStallProcessTests {
    static let drainTimeout = 4

    static func value(of metric: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(metric + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    @Test("Postgres frozen under a live relay: sends go on (200), a keyed send and the dead-token feed are answered 503 (the keyed send not sent), /readyz stays ready, the metrics say behind and count the timeouts; SIGTERM drains within its bound (exit 0) with the rows spooled, and the next relay writes every row once")
    func frozenDatabase() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let serverPort = try #require(URLComponents(string: database)?.port, "the test database URL names its port")
        let proxy = try FreezingTCPProxy(targetPort: serverPort)
        defer { proxy.stop() }
        var proxied = try #require(URLComponents(string: database))
        proxied.port = proxy.port
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let instance = "pgstall-\(UUID().uuidString.prefix(6))"
        let spool = relay.directory + "/spool-pgstall"

        func configuration(databaseURL: String) throws -> String {
            let config = try ServeProcessTests.writeConfiguration(
                directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: instance,
                databaseURL: databaseURL, spool: spool)
            let yaml = try String(contentsOfFile: config, encoding: .utf8)
                .replacingOccurrences(of: "drain_timeout_seconds: 20", with: "drain_timeout_seconds: \(Self.drainTimeout)")
                .replacingOccurrences(of: "  journal_sync: interval", with: "  journal_sync: interval\n  postgres_timeout_ms: 500")
            try yaml.write(toFile: config, atomically: true, encoding: .utf8)
            return config
        }

        let serve = try RelayProcess(arguments: ["serve", "--config", try configuration(databaseURL: try #require(proxied.string))])
        let base = "http://127.0.0.1:\(try await serve.port(after: "apns-relay ingress on"))"
        let metrics = "http://127.0.0.1:\(try await serve.port(after: "apns-relay metrics on"))"
        let first = try await relay.curl("POST", "/v1/send/batch", body: ServeProcessTests.batch(100), base: base)
        #expect(first.json?["summary"]?["succeeded"] == .integer(100), "\(first.body.prefix(300))")
        #expect(await eventually { (try? await ServeProcessTests.scalar(database, "SELECT count(*) FROM apns_audit")) == "100" })

        proxy.freeze()
        let second = try await relay.curl("POST", "/v1/send/batch", body: ServeProcessTests.batch(200, offset: 100), base: base)
        #expect(second.json?["summary"]?["succeeded"] == .integer(200), "sends go on while Postgres is frozen: \(second.body.prefix(300))")
        let sentBefore = relay.apnsRequests
        let keyed = try await relay.curl(
            "POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(900)), headers: ["Idempotency-Key: stall-\(UUID().uuidString)"],
            base: base)
        #expect(keyed.status == 503, "a keyed send cannot claim its key: \(keyed)")
        #expect(keyed.headers["retry-after"] != nil, "\(keyed)")
        #expect(relay.apnsRequests == sentBefore, "the keyed send was not sent")
        let feed = try await relay.curl("GET", "/v1/dead-tokens?app=app-a&since=24h", base: base)
        #expect(feed.status == 503, "the dead-token feed answers within the bound: \(feed)")
        let ready = try await relay.curl("GET", "/readyz", key: nil, base: metrics)
        #expect(ready.status == 200, "a Postgres every relay shares is not this relay's fault: \(ready)")

        var scrape = ""
        let counted = await eventually {
            scrape = (try? await relay.curl("GET", "/metrics", key: nil, base: metrics).body) ?? ""
            return (Self.value(of: "apns_relay_audit_postgres_timeouts_total", in: scrape) ?? 0) >= 1
                && (Self.value(of: "apns_relay_audit_behind_seconds", in: scrape) ?? 0) > 0
                && (Self.value(of: "apns_relay_audit_queue_depth", in: scrape) ?? -1) == 0
        }
        #expect(counted, "timeouts counted, behind, nothing held in memory: \(scrape.split(separator: "\n").filter { $0.hasPrefix("apns_relay_audit") })")

        // SIGTERM with Postgres still frozen: the drain ends within its bound.
        serve.signal(SIGTERM)
        let status = await serve.waitForExit(timeout: Double(Self.drainTimeout + 10 + 30))
        #expect(status == 0, "serve drained with exit 0 (got \(String(describing: status)))")

        // Postgres answers again; the next relay on the spool replays it.
        proxy.thaw()
        let next = try RelayProcess(arguments: ["serve", "--config", try configuration(databaseURL: database)])
        _ = try await next.port(after: "apns-relay ingress on")
        let sql = "SELECT count(*), count(DISTINCT apns_id) FROM apns_audit WHERE relay_instance = '\(instance)'"
        var rows = ""
        #expect(await eventually(60) {
            rows = (try? await ServeProcessTests.scalar(database, sql)) ?? ""
            return rows == "300|300"
        }, "one row per send, none twice: \(rows)")
        next.signal(SIGTERM)
        #expect(await next.waitForExit(timeout: Double(Self.drainTimeout + 10 + 30)) == 0)
        #expect(try await ServeProcessTests.scalar(database, sql) == "300|300")
    }
}
