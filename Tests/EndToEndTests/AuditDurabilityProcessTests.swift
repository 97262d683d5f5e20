import APNs
import Foundation
import MockAPNs
import Testing
import TestSupport

/// The audit's promise, held by the real binary: every answered send has
/// exactly one row, whatever kills the relay; libpq never writes raw text
/// into the JSON log stream.
@Suite("apns-relay audit durability, as a process")
struct AuditDurabilityProcessTests {
    @Test(
        "SIGKILL under concurrent load: every answered apns-id, and every one that reached APNs, has exactly one row after the next start; in-flight ones at most one (unknown)",
        arguments: ["interval", "always"])
    func sigkillUnderLoad(journalSync: String) async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        // APNs answers after 5 ms, so sends are in flight when the kill lands.
        let mock = try ServeProcessTests.slowMock(beside: relay, delayMilliseconds: 5)
        defer { mock.stop() }
        let instance = "kill-load-\(UUID().uuidString.prefix(6))"
        let config = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: mock, keyPath: relay.keyPath, instance: instance, databaseURL: database,
            spool: relay.directory + "/spool-kill-load-\(journalSync)", journalSync: journalSync)
        let serve = try RelayProcess(arguments: ["serve", "--config", config])
        let port = try await serve.port(after: "apns-relay ingress on")

        let driver = try LoadDriver(directory: relay.directory, port: port, threads: 16, until: .connectionDies)
        #expect(await eventually(60) { driver.answered.count >= 400 || !driver.isRunning }, "the load got going: \(driver.lines.suffix(5))")
        serve.signal(SIGKILL)
        #expect(await serve.waitForExit() != 0)
        #expect(await eventually(60) { !driver.isRunning }, "the driver stops once its connections die")
        let answered = Set(driver.answered)
        try #require(!answered.isEmpty, "\(driver.lines.prefix(3))")
        // Every send that left for APNs had its intent journaled first (with
        // `interval`: in the page cache, which the kill does not touch).
        let log = mock.engine.log
        let reached = Set(log.entries.compactMap(\.apnsID))
        try #require(log.entries.count == log.total, "the mock kept every request it saw")

        // The next relay on the same spool directory recovers the journal.
        let next = try RelayProcess(arguments: ["serve", "--config", config])
        _ = try await next.port(after: "apns-relay ingress on")
        let landed = await AuditTally.waitForRows(of: answered, in: database)
        next.signal(SIGTERM)
        #expect(await next.waitForExit() == 0)

        let tally = try await AuditTally.of(answered, in: database)
        let reachedTally = try await AuditTally.of(reached, in: database)
        print("SIGKILL under load, journal_sync \(journalSync): \(tally); reached APNs: \(reachedTally)")
        #expect(reachedTally.missing == 0, "sends that reached APNs without a row: \(reachedTally)")
        #expect(landed, "rows of answered sends landed: \(tally)")
        #expect(tally.missing == 0, "answered sends without a row: \(tally)")
        #expect(tally.duplicated == 0, "apns-ids with more than one row: \(tally)")
        #expect(tally.answeredButUnknown == 0, "an answered send must have its real outcome, not unknown: \(tally)")
        // Sends in flight at the kill: at most one row each, and only those may be unknown.
        #expect(tally.rows >= answered.count && tally.rows <= answered.count + 16 + 64, "\(tally)")
    }

    @Test("migrate twice on a real Postgres: standard error holds JSON lines only, the server's notices among them")
    func migrateNoticesAreJSON() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let directory = NSTemporaryDirectory() + "apns-relay-migrate-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var notices = 0
        for (run, level) in [(1, "debug"), (2, "debug"), (3, "info")] {
            let errors = directory + "/migrate-\(run).err"
            let migrate = try RelayProcess(arguments: ["migrate", "--database-url", database, "--log-level", level], standardError: errors)
            #expect(await migrate.waitForExit() == 0)
            let text = try String(contentsOfFile: errors, encoding: .utf8)
            for line in text.split(separator: "\n") {
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                #expect(object != nil, "run \(run): not a JSON log line: \(line)")
                if line.contains("already exists, skipping") { notices += 1 }
            }
            if level == "info" { #expect(!text.contains("already exists"), "notices are debug lines") }
        }
        #expect(notices >= 1, "the second run's 'already exists, skipping' notice arrives as a JSON line")
    }

    @Test("Postgres answers but rows do not land (no schema): /readyz fails past the limit and apns_relay_audit_behind_seconds grows; an outage alone keeps it ready")
    func readinessWhenBehind() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let unmigrated = try await ServeProcessTests.freshDatabase(url)
        try await withRelay(databaseURL: unmigrated, configure: {
            $0.audit.readinessBehindSeconds = 0.3
            $0.audit.migrateOnStart = false
        }) { relay in
            let sent = try await relay.curl("POST", "/v1/send", body: TestRelay.send())
            #expect(sent.status == 200, "rows spool; sends go on: \(sent)")
            var last: TestRelay.Answer?
            let notReady = await eventually {
                last = try? await relay.curl("GET", "/readyz", key: nil, base: relay.metricsBase)
                return last?.status == 503
            }
            #expect(notReady, "\(String(describing: last))")
            #expect(last?.body.contains("has not reached Postgres") == true, "\(String(describing: last))")
            let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase)
            let line = scrape.body.split(separator: "\n").first { $0.hasPrefix("apns_relay_audit_behind_seconds ") }
            #expect(line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { $0 > 0 } == true, "\(String(describing: line))")
        }
        // Nothing listens: an outage every relay shares. Behind, alerting, but ready.
        try await withRelay(databaseURL: "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1", configure: {
            $0.audit.readinessBehindSeconds = 0.3
            $0.audit.migrateOnStart = false
        }) { relay in
            _ = try await relay.curl("POST", "/v1/send", body: TestRelay.send())
            #expect(await eventually { relay.server.audit.statistics.behindSeconds() > 0.6 })
            let ready = try await relay.curl("GET", "/readyz", key: nil, base: relay.metricsBase)
            #expect(ready.status == 200, "\(ready)")
        }
    }

    @Test("after an outage past the readiness limit, a relay reconnecting to replay its spool stays ready (every relay replays at once); rows still not landing past the limit since Postgres answered take it out")
    func readyWhileReplayingAfterOutage() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let name = String(database[database.index(after: database.lastIndex(of: "/")!)...])
        let migrate = try RelayProcess(arguments: ["migrate", "--database-url", database])
        #expect(await migrate.waitForExit() == 0)
        // A session holds the table (the replay will wait on it), then the
        // database takes no new connections: the outage.
        let holder = try ChildProcess(
            ["psql", database, "-q", "-c", "BEGIN; LOCK TABLE apns_audit IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(600);"],
            standardOutput: .discard, standardError: .discard)
        let locked = """
            SELECT count(*) > 0 FROM pg_locks l JOIN pg_database d ON d.oid = l.database
            WHERE d.datname = '\(name)' AND l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock' AND l.granted
            """
        #expect(await eventually { (try? await ServeProcessTests.scalar(url, locked)) == "t" }, "the table is held")
        let release = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(name)' AND query LIKE '%pg_sleep(600)%'"
        defer { holder.signal(SIGTERM) }
        _ = try await ServeProcessTests.scalar(url, "ALTER DATABASE \(name) ALLOW_CONNECTIONS false")
        try await withRelay(databaseURL: database, configure: {
            $0.audit.readinessBehindSeconds = 1
            $0.audit.migrateOnStart = false
        }) { relay in
            func ready() async -> Int? { try? await relay.curl("GET", "/readyz", key: nil, base: relay.metricsBase).status }
            for _ in 0..<3 { #expect(try await relay.curl("POST", "/v1/send", body: TestRelay.send()).status == 200) }
            #expect(await eventually { relay.server.audit.statistics.behindSeconds() > 1.5 }, "the outage outlasts the limit")
            #expect(await ready() == 200, "an outage every relay shares keeps it in rotation")

            _ = try await ServeProcessTests.scalar(url, "ALTER DATABASE \(name) ALLOW_CONNECTIONS true")
            #expect(await eventually { relay.server.audit.statistics.connected }, "Postgres answers again")
            #expect(await ready() == 200, "replaying the outage's spool, as every relay is: \(relay.server.audit.statistics)")
            #expect(await eventually { await ready() == 503 }, "held past the limit since Postgres answered: stuck")

            _ = try await ServeProcessTests.scalar(url, release)
            #expect(await eventually { relay.server.audit.statistics.replayed >= 3 }, "\(relay.server.audit.statistics)")
            #expect(await eventually { await ready() == 200 })
        }
    }

    @Test("audit quarantine lists what Postgres refused (apns-id, SQLSTATE, error), never a dead-token row's token")
    func quarantineCommand() async throws {
        let spool = NSTemporaryDirectory() + "apns-relay-quarantine-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: spool + "/quarantine", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: spool) }
        let token = TestRelay.token(9)
        let deadLine = Data("app-a\tdevelopment\t\(token)\tabc123\tUnregistered\t\\N\t2026-11-22T00:00:00Z\t2026-11-22T00:00:00Z\n".utf8)
        let entries = [
            #"{"quarantined_at":"2026-11-22T07:30:00Z","kind":"audit","sqlstate":"22003","error":"integer out of range","apns_id":"6e1f0a4c-0000-4000-8000-000000000001","app":"app-a","line_base64":"eA=="}"#,
            #"{"quarantined_at":"2026-11-22T07:31:00Z","kind":"dead_token","sqlstate":"23502","error":"null value","app":"app-a","line_base64":"\#(deadLine.base64EncodedString())"}"#,
        ]
        try (entries.joined(separator: "\n") + "\n").write(toFile: spool + "/quarantine/quarantine.jsonl", atomically: true, encoding: .utf8)
        let table = try await ProcessRunner.runOffPool([RelayProcess.binary, "audit", "quarantine", "--spool-directory", spool])
        #expect(table.status == 0, "\(table.output)")
        #expect(table.output.contains("6e1f0a4c-0000-4000-8000-000000000001") && table.output.contains("22003"), "\(table.output)")
        #expect(table.output.contains("(2 rows)"), "\(table.output)")
        #expect(!table.output.contains(token), "a dead-token row's token must never be printed")
        let json = try await ProcessRunner.runOffPool([RelayProcess.binary, "audit", "quarantine", "--spool-directory", spool, "--format", "json"])
        #expect(json.status == 0 && json.output.contains(#""sqlstate":"23502""#), "\(json.output)")
        #expect(!json.output.contains(token))
    }
}
