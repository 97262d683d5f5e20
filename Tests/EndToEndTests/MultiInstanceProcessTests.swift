import Foundation
import MockAPNs
import RelayJSON
import Testing
import TestSupport

/// Three `apns-relay serve` processes on one Postgres behind HAProxy, as a
/// horizontally scaled deployment runs them (docs/operations.md, "More than
/// one relay"): what holds across instances while they are killed and replaced
/// under load.
@Suite("apns-relay serve, three instances behind HAProxy")
struct MultiInstanceProcessTests {
    /// One relay process: its configuration file, fixed ingress port after the first start.
    struct Instance {
        var name: String
        var config: String
        var process: RelayProcess
        var port: UInt16
        /// The relay's standard error (its JSON log).
        var log: String

        /// The log's last lines, for a failure message.
        func logTail(_ count: Int = 15) -> String {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? "(no log)"
            let lines = text.split(separator: "\n")
            // A crash report's head says what stopped the process; its registers do not.
            let crash = lines.filter { $0.contains("Fatal") || $0.contains("Crash") || $0.contains("error") || $0.contains(" at /") || $0.hasPrefix("#") }
            return (crash.prefix(40) + ["..."] + lines.suffix(count)).joined(separator: "\n")
        }
    }

    /// Starts `serve` as instance `name` on `spool`, sending to `mock`; `port` 0
    /// picks a free one, a given port is the one its predecessor had.
    static func start(_ name: String, relay: TestRelay, mock: MockAPNsServer, database: String, spool: String, port: UInt16 = 0) async throws -> Instance {
        let directory = relay.directory + "/" + name
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let config = try ServeProcessTests.writeConfiguration(
            directory: directory, mock: mock, keyPath: relay.keyPath, instance: name, databaseURL: database, spool: spool)
        if port != 0 {
            let text = try String(contentsOfFile: config, encoding: .utf8)
            try text.replacingOccurrences(of: "  listen: 127.0.0.1:0\nmetrics", with: "  listen: 127.0.0.1:\(port)\nmetrics")
                .write(toFile: config, atomically: true, encoding: .utf8)
        }
        let log = directory + "/serve-\(UUID().uuidString.prefix(4)).log"
        let process = try RelayProcess(arguments: ["serve", "--config", config], standardError: log)
        let bound = try await process.port(after: "apns-relay ingress on")
        if port != 0 { #expect(bound == port, "\(name) took its predecessor's port") }
        return Instance(name: name, config: config, process: process, port: bound, log: log)
    }

    static let threads = 12

    @Test("SIGKILL one relay and replace another with SIGTERM under load through HAProxy: every answered send has one audit row; dead tokens and idempotency keys are shared")
    func killAndReplaceBehindHAProxy() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let relay = try await TestRelay.start(rules: [MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1_700_000_000_000))])
        defer { Task { await relay.stop() } }
        // APNs answers after 5 ms, so sends are in flight when a signal lands.
        let mock = try ServeProcessTests.slowMock(beside: relay, delayMilliseconds: 5)
        defer { mock.stop() }
        let run = UUID().uuidString.prefix(6).lowercased()

        func start(_ name: String, spool: String, port: UInt16 = 0) async throws -> Instance {
            try await Self.start(name, relay: relay, mock: mock, database: database, spool: relay.directory + "/" + spool, port: port)
        }
        var a = try await start("multi-a-\(run)", spool: "spool-a")
        let b = try await start("multi-b-\(run)", spool: "spool-b")
        let c = try await start("multi-c-\(run)", spool: "spool-c")
        // HAProxy names servers by slot (the port), not by the process behind it.
        let balancer = try await HAProxyBalancer(
            directory: relay.directory, backends: [.init(name: "a", port: a.port), .init(name: "b", port: b.port), .init(name: "c", port: c.port)])
        defer { Task { await balancer.stop() } }
        for slot in ["a", "b", "c"] { #expect(await balancer.waitFor(slot, "UP") == nil) }

        // A backend's clients: keep-alive connections through the balancer, reconnecting when one dies.
        let driver = try LoadDriver(directory: relay.directory, port: balancer.port, threads: Self.threads, until: .inputCloses)
        /// Waits until `more` sends were answered since the call.
        func answered(_ more: Int) async -> Bool {
            let target = driver.answered.count + more
            return await eventually(60) { driver.answered.count >= target || !driver.isRunning }
        }

        #expect(await answered(200), "the load got going: \(driver.lines.suffix(5))")

        // A crashes: SIGKILL, then a new process on its spool and port (a pod's container restart).
        a.process.signal(SIGKILL)
        #expect(await a.process.waitForExit() != 0)
        #expect(await balancer.waitFor("a", "DOWN") == nil)
        #expect(await answered(150), "the load goes on over b and c")
        a = try await start(a.name, spool: "spool-a", port: a.port)
        #expect(await balancer.waitFor("a", "UP") == nil)
        #expect(await answered(150))

        // B is replaced (a rolling update): SIGTERM drains it (its /readyz fails, HAProxy
        // takes it out), then a fresh instance with a spool of its own takes the slot.
        b.process.signal(SIGTERM)
        let exit = await b.process.waitForExit()
        #expect(exit == 0, "a drained relay exits 0; exit \(String(describing: exit)), output \(b.process.output.suffix(5)), log:\n\(b.logTail())")
        #expect(await balancer.waitFor("b", "DOWN") == nil)
        #expect(await answered(150), "the load goes on over a and c")
        let b2 = try await start("multi-b2-\(run)", spool: "spool-b2", port: b.port)
        #expect(await balancer.waitFor("b", "UP") == nil)
        #expect(await answered(200), "the load reaches the replacement too")

        // Dead tokens are shared: APNs answers 410 through A; B's replacement lists it.
        let dead = TestRelay.token(Int.random(in: 1...1_000_000), prefix: "dead")
        let refused = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: dead), base: "http://127.0.0.1:\(a.port)")
        #expect(refused.status == 410, "\(refused)")
        var feed: TestRelay.Answer?
        let shared = await eventually(30) {
            feed = try? await relay.curl("GET", "/v1/dead-tokens?app=app-a&since=24h&environment=development", base: "http://127.0.0.1:\(b2.port)")
            return feed?.json?["deadTokens"]?.arrayValue?.contains { $0["token"] == .string(dead) } == true
        }
        #expect(shared, "a token APNs called dead through one relay is in every relay's feed: \(String(describing: feed))")

        // Idempotency across instances: one key through relay a, then b2, then the
        // balancer (any of them): one APNs request, one apns-id, the later two replays.
        let key = "multi-\(run)-\(UUID().uuidString)"
        let keyedToken = TestRelay.token(31, prefix: "1d")
        let keyedBody = TestRelay.send(token: keyedToken)
        var keyedAnswers: [TestRelay.Answer] = []
        for port in [a.port, b2.port, balancer.port] {
            keyedAnswers.append(try await relay.curl("POST", "/v1/send", body: keyedBody, headers: ["Idempotency-Key: \(key)"], base: "http://127.0.0.1:\(port)"))
        }
        #expect(keyedAnswers.map(\.status) == [200, 200, 200], "\(keyedAnswers)")
        let keyedIDs = keyedAnswers.map { $0.json?["apnsId"]?.stringValue }
        #expect(keyedIDs[0] != nil && Set(keyedIDs).count == 1, "one apns-id for one key across relays: \(keyedIDs)")
        #expect(keyedAnswers.map { $0.headers["idempotency-replayed"] } == [nil, "true", "true"])
        #expect(keyedAnswers[1].body == keyedAnswers[0].body && keyedAnswers[2].body == keyedAnswers[0].body)
        #expect(mock.engine.log.entries.filter { $0.request.path.hasSuffix(keyedToken) }.count == 1, "APNs saw the keyed send once")

        // Stop the load, then every relay (drained: every row written).
        try driver.stop()
        #expect(await eventually(60) { !driver.isRunning }, "the driver stops when its input closes")
        let answeredIDs = Set(driver.answered)
        try #require(!answeredIDs.isEmpty)
        // A's restart replays its journal in the background: wait for its rows before stopping it.
        let landed = await AuditTally.waitForRows(of: answeredIDs, in: database)
        for instance in [a, b2, c] { instance.process.signal(SIGTERM) }
        for instance in [a, b2, c] { #expect(await instance.process.waitForExit() == 0, "\(instance.name) drained") }
        await balancer.stop()

        let tally = try await AuditTally.of(answeredIDs, in: database)
        let keyedRows = try await ServeProcessTests.scalar(
            database, "SELECT count(*) FROM apns_audit WHERE idempotency_key_hash = '\(IdempotencyTests.keyHash(key))'")
        #expect(keyedRows == "1", "one audit row for the key sent through three relays")
        let idList = answeredIDs.map { "('\($0)')" }.joined(separator: ",")
        let shares = try await ServeProcessTests.scalar(database, """
            WITH answered(id) AS (VALUES \(idList))
            SELECT string_agg(relay_instance || '=' || n, ' ' ORDER BY relay_instance)
            FROM (SELECT relay_instance, count(*) AS n FROM apns_audit JOIN answered ON apns_id = answered.id GROUP BY relay_instance) s
            """)
        let others = driver.others
        print("""
            three relays behind HAProxy: \(tally); \
            not answered 200: \(others.count) (\(Dictionary(grouping: others) { $0.split(separator: " ").prefix(2).joined(separator: " ") }.mapValues(\.count))); \
            per instance: \(shares.replacingOccurrences(of: "-\(run)", with: ""))
            """)
        #expect(landed, "rows of answered sends landed: \(tally)")
        #expect(tally.missing == 0, "answered sends without a row: \(tally)")
        #expect(tally.duplicated == 0, "apns-ids with more than one row: \(tally)")
        #expect(tally.answeredButUnknown == 0, "an answered send has its real outcome, not unknown: \(tally)")
        // Rows beyond the answered sends: the dead-token send, and sends in flight when
        // A was killed (HAProxy answered 502 or the connection died), at most one each.
        #expect(tally.rows >= answeredIDs.count + 1 && tally.rows <= answeredIDs.count + 1 + others.count, "\(tally); \(others.prefix(20))")
        // Every instance took a share (each send has a token of its own, hashed over the relays up); the names are the audit's relay_instance.
        for name in [a.name, b.name, b2.name, c.name] { #expect(shares.contains(name + "="), "\(name) answered nothing: \(shares)") }
    }

    @Test("Live Activity timestamp order holds across two relays because the shipped balancer routes a send by its token; each relay remembers only its own")
    func timestampOrderFollowsTheToken() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let run = UUID().uuidString.prefix(6).lowercased()
        let a = try await Self.start("order-a-\(run)", relay: relay, mock: relay.mock, database: database, spool: relay.directory + "/spool-oa")
        let b = try await Self.start("order-b-\(run)", relay: relay, mock: relay.mock, database: database, spool: relay.directory + "/spool-ob")
        let balancer = try await HAProxyBalancer(
            directory: relay.directory, backends: [.init(name: "a", port: a.port), .init(name: "b", port: b.port)])
        defer { Task { await balancer.stop() } }
        for slot in ["a", "b"] { #expect(await balancer.waitFor(slot, "UP") == nil) }

        let token = TestRelay.token(Int.random(in: 1...1_000_000), prefix: "ac71")
        func update(_ timestamp: Int, through base: String) async throws -> TestRelay.Answer {
            try await relay.curl("POST", "/v1/send", body: TestRelay.send("update", token: token, extra: #","timestamp":\#(timestamp)"#), base: base)
        }
        let first = try await update(1_700_000_500, through: balancer.base)
        #expect(first.status == 200, "\(first)")
        // Round robin over two relays would hand every other request to the one
        // that never saw the first update; routed by token, each lands where it did.
        for _ in 0..<4 {
            let stale = try await update(1_700_000_500, through: balancer.base)
            #expect(stale.status == 400 && stale.error?["reason"] == "StaleTimestamp", "a stale update is refused whichever request it is: \(stale)")
        }
        #expect(try await update(1_700_000_501, through: balancer.base).status == 200)
        // The memory is per instance: straight to each relay, only the one the
        // balancer chose refuses the same stale timestamp.
        var statuses: [Int] = []
        for instance in [a, b] { statuses.append(try await update(1_700_000_501, through: "http://127.0.0.1:\(instance.port)").status) }
        #expect(statuses.sorted() == [200, 400], "\(statuses)")

        for instance in [a, b] { instance.process.signal(SIGTERM) }
        for instance in [a, b] { #expect(await instance.process.waitForExit() == 0) }
    }
}
