import Foundation
import MockAPNs
import RelayJSON
import Synchronization
import Testing
import TestSupport

/// `serve`'s parts under one ServiceGroup: the drain's order as seen from
/// outside (intake, then the send, its audit row, its spans), and a part
/// that hangs cannot keep the process alive.
@Suite("serve's parts: drain order and bound")
struct LifecycleProcessTests {
    @Test("SIGTERM (twice) with a send held at APNs: /readyz fails while it still runs; released, it answers 200, gets its audit row, and the exporter (last) sends the spans it ended during the drain; exit 0")
    func drainOrder() async throws {
        // Spans leave only when the exporter is shut down: a schedule delay
        // of ten minutes, so what the receiver gets was sent by the last part.
        guard let setup = try await TraceExportProcessTests.start(
            "order", rules: [MockRule(.tokenPrefix("cafe"), always: .hold)], scheduleDelayMilliseconds: 600_000)
        else { return }
        let (relay, receiver, serve, database, port) = (setup.relay, setup.receiver, setup.serve, setup.database, setup.port)
        defer { Task { _ = await receiver.stop(); await relay.stop() } }
        let metricsPort = try await serve.port(after: "apns-relay metrics on")
        let base = "http://127.0.0.1:\(port)"
        let metrics = "http://127.0.0.1:\(metricsPort)"

        let answered = Atomic<Bool>(false)
        let held = Task {
            defer { answered.store(true, ordering: .sequentiallyConsistent) }
            return try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(1, prefix: "cafe")), base: base)
        }
        #expect(await eventually { relay.mock.engine.heldCount == 1 }, "the send is held at APNs")
        #expect(receiver.lineCount == 0, "nothing exported before the drain")
        serve.signal(SIGTERM)

        // 1. Intake stops while the send is still held: the ingress listener
        // stops first (new connections wait unaccepted, a kept-alive one gets
        // 503 Draining), and /readyz on the metrics listener says so.
        #expect(await eventually { (try? await relay.curl("GET", "/readyz", key: nil, base: metrics))?.status == 503 }, "/readyz fails")
        // A second signal (an impatient operator) must not cut the drain
        // short: the answer and the exit status below say it did not.
        serve.signal(SIGTERM)
        #expect(relay.mock.engine.heldCount == 1 && !answered.load(ordering: .sequentiallyConsistent), "the held send is still running")

        // 2. Released, it finishes with its result; the process drains and exits 0.
        #expect(relay.mock.engine.releaseHeld() == 1)
        let answer = try await held.value
        #expect(answer.status == 200, "\(answer)")
        let apnsID = try #require(answer.json?["apnsId"]?.stringValue)
        #expect(await serve.waitForExit() == 0)

        // 3. Its audit row was written before the process ended.
        let row = try await ServeProcessTests.scalar(database, "SELECT count(*), min(outcome) FROM apns_audit WHERE apns_id = '\(apnsID)'")
        #expect(row == "1|success", "\(row)")

        // 4. The exporter ran last: the held send's spans, ended during the
        // drain, reached the receiver (the whole trace: request, send, attempt).
        let spans = receiver.spans
        let send = try #require(
            spans.first { $0["name"] == "apns.send" && $0["attributes"]?["apns.id"]?.stringValue == apnsID },
            "the held send's span was exported: \(spans.map { $0["name"]?.stringValue ?? "?" })")
        let trace = spans.filter { $0["trace_id"] == send["trace_id"] }.compactMap { $0["name"]?.stringValue }.sorted()
        #expect(trace == ["apns.attempt", "apns.send", "ingress.request"], "\(trace)")
    }

    @Test("the audit writer connecting to a Postgres that never answers (the handshake, then silence) does not hold the drain: SIGTERM ends serve within its bound with exit 0, the answered send's row spooled; the next start records it")
    func silentPostgresDoesNotHoldTheDrain() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        // A "Postgres" that completes the TCP handshake (the kernel does,
        // from the backlog) and never answers. Before audit.postgres_timeout_ms
        // libpq waited for ever there, and the lifecycle had to abandon the
        // writer at the drain's bound (exit 1); now the drain's cutoff ends the
        // connect (the bound itself, 10 s, is longer than this drain).
        let silent = try ChildProcess(
            ["python3", "-c", "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(16); print(s.getsockname()[1], flush=True); time.sleep(600)"],
            standardOutput: .pipe)
        defer { silent.kill() }
        let silentPort = Mutex<String?>(nil)
        ChildProcess.collectLines(of: silent.standardOutput!) { line in silentPort.withLock { $0 = $0 ?? line } }
        #expect(await eventually { silentPort.withLock { $0 } != nil })
        let port = try #require(silentPort.withLock { $0 })

        let spool = relay.directory + "/spool-hung"
        let instance = "hung-\(UUID().uuidString.prefix(6))"
        let config = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: instance,
            databaseURL: "postgresql://postgres@127.0.0.1:\(port)/none", spool: spool)
        let yaml = try String(contentsOfFile: config, encoding: .utf8)
            .replacingOccurrences(of: "drain_timeout_seconds: 20", with: "drain_timeout_seconds: 1")
            .replacingOccurrences(of: "  flush_interval_ms: 20", with: "  flush_interval_ms: 20\n  migrate_on_start: false")
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        let logFile = relay.directory + "/hung.log"
        let serve = try RelayProcess(arguments: ["serve", "--config", config], standardError: logFile)
        let base = "http://127.0.0.1:\(try await serve.port(after: "apns-relay ingress on"))"
        let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send(), base: base)
        #expect(answer.status == 200, "\(answer)")
        let apnsID = try #require(answer.json?["apnsId"]?.stringValue)

        serve.signal(SIGTERM)
        // Bounded: 1 s of drain timeout + 10 s of margin, not for ever.
        #expect(await serve.waitForExit(timeout: 60) == 0, "serve drains with exit 0")
        let log = try String(contentsOfFile: logFile, encoding: .utf8)
        let lines = log.split(separator: "\n")
        for line in lines { #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "not JSON: \(line)") }
        #expect(lines.contains { $0.contains("audit writer cannot reach Postgres") && $0.contains("did not answer") }, "\(log.suffix(1500))")
        #expect(lines.contains { $0.contains(#""msg":"drained""#) && $0.contains(#""audit_spooled":"1""#) }, "\(log.suffix(1500))")
        #expect(!lines.contains { $0.contains("did not stop within the drain's bound") }, "\(log.suffix(1500))")

        // Nothing lost: the row is in the spool; a relay on the same spool
        // with a Postgres that answers writes it.
        let database = try await ServeProcessTests.freshDatabase(url)
        let next = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: instance, databaseURL: database, spool: spool)
        let restarted = try RelayProcess(arguments: ["serve", "--config", next])
        _ = try await restarted.port(after: "apns-relay ingress on")
        let recorded = await eventually(30) {
            (try? await ServeProcessTests.scalar(database, "SELECT count(*), min(outcome) FROM apns_audit WHERE apns_id = '\(apnsID)'")) == "1|success"
        }
        #expect(recorded, "the next start records the answered send's row")
        restarted.signal(SIGTERM)
        #expect(await restarted.waitForExit() == 0)
    }
}
