import Foundation
import Testing
import TestSupport

/// A wait measured on the wall clock lasts a whole step of that clock
/// longer: the audit writer and the batch deadlines wait on the monotonic
/// clock (`MonotonicCondition`), which the shim's step does not move.
@Suite("apns-relay under a wall-clock step, as a process")
struct ClockJumpProcessTests {
    @Test("the wall clock steps back 10 minutes while serve runs (NTP, a resumed VM): the next sends' rows still reach Postgres at once, not 10 minutes later; SIGTERM then exits 0")
    func backwardStep() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let instance = "clock-step-\(UUID().uuidString.prefix(6))"
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let shim = try await ClockShim.build(in: relay.directory)
        let config = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: instance, databaseURL: database,
            spool: relay.directory + "/spool-clock-step")
        let serve = try RelayProcess(arguments: ["serve", "--config", config], environment: shim.environment)
        let port = try await serve.port(after: "apns-relay ingress on")
        let base = "http://127.0.0.1:\(port)"
        let count = "SELECT count(*) FROM apns_audit WHERE relay_instance = '\(instance)'"
        func rows() async -> String { (try? await ServeProcessTests.scalar(database, count)) ?? "?" }

        let first = try await relay.curl("POST", "/v1/send/batch", body: ServeProcessTests.batch(3), base: base)
        #expect(first.json?["summary"]?["succeeded"] == .integer(3), "\(first.body.prefix(300))")
        #expect(await eventually(2, every: .milliseconds(200)) { await rows() == "3" }, "rows before the step")

        try shim.shift(seconds: -600)
        let second = try await relay.curl("POST", "/v1/send/batch", body: ServeProcessTests.batch(5, offset: 3), base: base)
        #expect(second.json?["summary"]?["succeeded"] == .integer(5), "\(second.body.prefix(300))")
        // The writer takes a partial batch `flush_interval_ms` (20) after
        // its previous take; measured on the wall clock, that take was
        // 10 minutes in the future.
        let landed = await eventually(2, every: .milliseconds(200)) { await rows() == "8" }
        let after = await rows()
        #expect(landed, "rows after the step: \(after)")

        serve.signal(SIGTERM)
        #expect(await serve.waitForExit() == 0)
        let final = await rows()
        #expect(final == "8", "exactly one row per send")
    }

    @Test("the wall clock steps back 10 minutes while a batch waits on APNs: the batch deadline (2 s) still cancels it, not the APNs answer 20 s later")
    func batchDeadlineAcrossBackwardStep() async throws {
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let shim = try await ClockShim.build(in: relay.directory)
        let mock = try ServeProcessTests.slowMock(beside: relay, delayMilliseconds: 20_000)
        defer { mock.stop() }
        let spoolOnly = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"
        let config = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: mock, keyPath: relay.keyPath, instance: "clock-batch", databaseURL: spoolOnly,
            spool: relay.directory + "/spool-clock-batch")
        let yaml = try String(contentsOfFile: config, encoding: .utf8)
        try yaml.replacingOccurrences(of: "ingress:\n", with: "ingress:\n  batch_deadline_seconds: 2\n")
            .write(toFile: config, atomically: true, encoding: .utf8)
        let serve = try RelayProcess(arguments: ["serve", "--config", config], environment: shim.environment)
        let port = try await serve.port(after: "apns-relay ingress on")

        let batch = Task { try await relay.curl("POST", "/v1/send/batch", body: ServeProcessTests.batch(1), base: "http://127.0.0.1:\(port)") }
        #expect(await eventually { mock.engine.log.total > 0 }, "the send reached APNs")
        try shim.shift(seconds: -600)
        let answer = try await batch.value
        let items = BatchOverloadTests.results(answer)
        #expect(items.count == 1 && items.allSatisfy { BatchOverloadTests.errorType($0) == "Cancelled" }, "\(answer.body.prefix(400))")
        serve.signal(SIGTERM)
        #expect(await serve.waitForExit() == 0)
    }
}
