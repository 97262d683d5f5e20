import Foundation
import MockAPNs
import RelayJSON
import Testing
import TestSupport

/// Issue 27, item 2: a keyed send answered while Postgres was stopped left
/// its key `in_flight` (the answer could not be recorded); once the lease
/// ran out a repeat claimed the key over and the same push went out again.
/// Both tests stop a Postgres cluster of their own with keyed sends held at
/// the mock APNs, answer them, move the idempotency clock past the lease,
/// start Postgres again and repeat every key: APNs must see each key once.
@Suite("Idempotency keys through a Postgres outage")
struct IdempotencyOutageTests {
    static let sends = 6

    /// The mock holds each token's first attempt (released by the test) and
    /// answers any later request for it at once, so a second push shows up
    /// in the mock's count instead of hanging the test.
    static let holdFirst = [MockRule(.tokenPrefix("cafe"), [.hold, .succeed])]

    static func body(_ index: Int) -> String { TestRelay.send(token: TestRelay.token(index, prefix: "cafe")) }

    /// Sends every key while Postgres runs, stops it while the sends are held
    /// at APNs, releases them and returns their answers (all 200).
    static func sendThroughOutage(_ relay: TestRelay, _ cluster: PrivateCluster, keys: [String]) async throws -> [TestRelay.Answer] {
        let tasks = keys.indices.map { index in
            Task { try await relay.curl("POST", "/v1/send", body: body(index), headers: ["Idempotency-Key: \(keys[index])"]) }
        }
        #expect(await eventually { relay.mock.engine.heldCount == keys.count }, "held: \(relay.mock.engine.heldCount)")
        try await cluster.stop()
        #expect(relay.mock.engine.releaseHeld() == keys.count)
        var answers: [TestRelay.Answer] = []
        for task in tasks { answers.append(try await task.value) }
        for answer in answers { #expect(answer.status == 200, "\(answer)") }
        return answers
    }

    static func lease(_ relay: TestRelay) -> Int64 { Int64(relay.server.configuration.apns.sendDeadlineSeconds) + 30 }

    @Test("answered while Postgres was stopped, repeated past the lease with Postgres back: every repeat gets the first answer, APNs saw each key once")
    func sameRelay() async throws {
        let cluster = try #require(try await PrivateCluster.create(), "no Postgres binaries for a private cluster")
        let clock = ManualClock()
        do {
            try await withRelay(rules: Self.holdFirst, databaseURL: cluster.url, configure: {
                $0.ingress.idempotencyClock = { clock.milliseconds }
                $0.audit.flushIntervalMilliseconds = 10
            }) { relay in
                let keys = (0..<Self.sends).map { _ in IdempotencyTests.newKey() }
                let firsts = try await Self.sendThroughOutage(relay, cluster, keys: keys)
                clock.advance(seconds: Self.lease(relay) + 1)
                try await cluster.start()
                for (index, key) in keys.enumerated() {
                    let again = try await relay.curl("POST", "/v1/send", body: Self.body(index), headers: ["Idempotency-Key: \(key)"])
                    #expect(again.status == 200 && again.headers["idempotency-replayed"] == "true", "\(again)")
                    #expect(again.headers["apns-id"] == firsts[index].headers["apns-id"])
                }
                #expect(relay.apnsRequests == Self.sends, "APNs requests: \(relay.apnsRequests)")
            }
        } catch {
            await cluster.remove()
            throw error
        }
        await cluster.remove()
    }

    @Test("answered while Postgres was stopped, the relay then stopped: a new relay on the same spool, past the lease, answers every repeat from the audit row and sends nothing")
    func newRelay() async throws {
        let cluster = try #require(try await PrivateCluster.create(), "no Postgres binaries for a private cluster")
        let clock = ManualClock()
        let spool = NSTemporaryDirectory() + "apns-relay-keyspool-" + UUID().uuidString
        let keys = (0..<Self.sends).map { _ in IdempotencyTests.newKey() }
        do {
            var firsts: [TestRelay.Answer] = []
            try await withRelay(rules: Self.holdFirst, databaseURL: cluster.url, configure: {
                $0.ingress.idempotencyClock = { clock.milliseconds }
                $0.audit.spoolDirectory = spool
            }) { relay in
                firsts = try await Self.sendThroughOutage(relay, cluster, keys: keys)
            }
            // The first relay has drained with Postgres away: its rows wait
            // in the spool directory, its keys stay in_flight in the table.
            try await cluster.start()
            clock.advance(seconds: 3600)
            try await withRelay(rules: Self.holdFirst, databaseURL: cluster.url, configure: {
                $0.ingress.idempotencyClock = { clock.milliseconds }
                $0.audit.spoolDirectory = spool
            }) { relay in
                let hashes = keys.map { "'\(IdempotencyTests.keyHash($0))'" }.joined(separator: ",")
                let landed = await eventually(60) {
                    let rows = try? await OutcomeAgreementTests.psql(cluster.url, "SELECT count(*) FROM apns_audit WHERE idempotency_key_hash IN (\(hashes))")
                    return rows == [["\(Self.sends)"]]
                }
                #expect(landed, "the first relay's rows did not reach the table")
                let inFlight = try await OutcomeAgreementTests.psql(
                    cluster.url, "SELECT count(*) FROM apns_idempotency_keys WHERE key_hash IN (\(hashes)) AND state = 'in_flight'")
                #expect(inFlight == [["\(Self.sends)"]], "the outage should have left every key in flight")
                for (index, key) in keys.enumerated() {
                    let again = try await relay.curl("POST", "/v1/send", body: Self.body(index), headers: ["Idempotency-Key: \(key)"])
                    #expect(again.status == 200 && again.headers["idempotency-replayed"] == "true", "\(again)")
                    #expect(again.headers["apns-id"] == firsts[index].headers["apns-id"])
                    #expect(again.json?["apnsId"] == firsts[index].json?["apnsId"])
                    #expect(again.json?["attempts"] == .integer(1))
                }
                #expect(relay.apnsRequests == 0, "APNs requests from the new relay: \(relay.apnsRequests)")
                // Settled: the keys are done now, and a repeat reads the stored answer.
                let done = try await OutcomeAgreementTests.psql(
                    cluster.url, "SELECT count(*) FROM apns_idempotency_keys WHERE key_hash IN (\(hashes)) AND state = 'done'")
                #expect(done == [["\(Self.sends)"]])
                let third = try await relay.curl("POST", "/v1/send", body: Self.body(0), headers: ["Idempotency-Key: \(keys[0])"])
                #expect(third.status == 200 && third.headers["apns-id"] == firsts[0].headers["apns-id"], "\(third)")
                #expect(relay.apnsRequests == 0)
            }
        } catch {
            await cluster.remove()
            try? FileManager.default.removeItem(atPath: spool)
            throw error
        }
        await cluster.remove()
        try? FileManager.default.removeItem(atPath: spool)
    }
}
