import Foundation
import MockAPNs
import RelayBasics
import RelayJSON
import Testing
import TestSupport

/// A client's `apns-id` is the send's idempotency key on the HTTP/2 APNs
/// ingress: every answer to a repeat of it is APNs' own shape (status,
/// `apns-id` of the first send, `{"reason": …}`), whether it comes from the
/// stored answer, the audit row, or the key's refusals, so an APNs client
/// library's handling applies unchanged. Each case checks what the mock APNs
/// received: the first request only. Needs the audit database
/// (APNS_RELAY_TEST_DATABASE_URL).
@Suite("HTTP/2 APNs ingress: repeated apns-ids", .serialized,
       .enabled(if: ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] != nil))
struct APNsHTTP2IdempotencyTests {
    static let payload = #"{"aps":{"alert":"once"}}"#

    static func send(_ port: Int, _ key: APNsHTTP2IngressTests.BackendKey, token: String, apnsID: String, payload: String = payload) async throws -> TestRelay.Answer {
        try await APNsHTTP2IngressTests.curl(
            port: port, caFile: nil, token: try key.token(), path: "/3/device/\(token)", body: payload,
            headers: ["apns-topic: com.example.a", "apns-push-type: alert", "apns-id: \(apnsID)"])
    }

    /// How many requests the mock APNs received with `apnsID`.
    static func received(_ relay: TestRelay, apnsID: String) -> Int {
        relay.mock.engine.log.entries.filter { $0.request.headers.value(of: "apns-id")?.lowercased() == apnsID }.count
    }

    @Test("a repeat after success is the first success again (200, its apns-id and apns-unique-id, no body); after APNs' 410 it is that 410 with its reason and timestamp")
    func repeatsAnsweredAsFirst() async throws {
        let key = try APNsHTTP2IngressTests.BackendKey()
        defer { key.file.remove() }
        let url = try #require(ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"])
        try await APNsHTTP2IngressTests.withIngress(key: key, tls: false, databaseURL: url) { relay, port, _ in
            let good = UUID().uuidString.lowercased()
            let first = try await Self.send(port, key, token: TestRelay.token(11), apnsID: good)
            let again = try await Self.send(port, key, token: TestRelay.token(11), apnsID: good)
            #expect(first.status == 200 && first.body.isEmpty && first.headers["apns-id"] == good, "\(first) \(first.headers)")
            #expect(again.status == 200 && again.body.isEmpty, "\(again)")
            #expect(again.headers["apns-id"] == good && again.headers["idempotency-replayed"] == "true", "\(again.headers)")
            let unique = try #require(first.headers["apns-unique-id"], "the mock sends apns-unique-id")
            #expect(again.headers["apns-unique-id"] == unique)
            #expect(Self.received(relay, apnsID: good) == 1)

            let gone = UUID().uuidString.lowercased()
            let dead = TestRelay.token(12, prefix: APNsHTTP2IngressTests.deadPrefix)
            let refused = try await Self.send(port, key, token: dead, apnsID: gone)
            let repeated = try await Self.send(port, key, token: dead, apnsID: gone)
            for answer in [refused, repeated] {
                #expect(answer.status == 410 && answer.headers["apns-id"] == gone, "\(answer) \(answer.headers)")
                #expect(answer.json?["reason"]?.stringValue == "Unregistered", "\(answer)")
                #expect(answer.json?["timestamp"] == .integer(APNsHTTP2IngressTests.unregisteredAt), "\(answer)")
            }
            #expect(repeated.headers["idempotency-replayed"] == "true")
            #expect(Self.received(relay, apnsID: gone) == 1)
        }
    }

    @Test("while the first send with an apns-id is at APNs a repeat is 503 ServiceUnavailable with retry-after and that apns-id; the apns-id with another payload is 400 BadMessageId; neither is sent")
    func keyRefusals() async throws {
        let key = try APNsHTTP2IngressTests.BackendKey()
        defer { key.file.remove() }
        let url = try #require(ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"])
        let hold = [MockRule(.tokenPrefix("cafe"), [.hold, .succeed])]
        try await APNsHTTP2IngressTests.withIngress(key: key, tls: false, databaseURL: url, rules: hold) { relay, port, _ in
            let apnsID = UUID().uuidString.lowercased()
            let token = TestRelay.token(13, prefix: "cafe")
            let first = Task { try await Self.send(port, key, token: token, apnsID: apnsID) }
            #expect(await eventually { relay.mock.engine.heldCount == 1 }, "held: \(relay.mock.engine.heldCount)")
            let inFlight = try await Self.send(port, key, token: token, apnsID: apnsID)
            #expect(inFlight.status == 503 && inFlight.json?["reason"]?.stringValue == "ServiceUnavailable", "\(inFlight)")
            #expect(inFlight.headers["apns-id"] == apnsID && inFlight.headers["retry-after"] == "1", "\(inFlight.headers)")
            #expect(relay.mock.engine.releaseHeld() == 1)
            let answered = try await first.value
            #expect(answered.status == 200 && answered.headers["apns-id"] == apnsID, "\(answered)")

            let reused = try await Self.send(port, key, token: token, apnsID: apnsID, payload: #"{"aps":{"alert":"another"}}"#)
            #expect(reused.status == 400 && reused.json?["reason"]?.stringValue == "BadMessageId", "\(reused)")
            #expect(reused.headers["apns-id"] == apnsID, "\(reused.headers)")
            #expect(Self.received(relay, apnsID: apnsID) == 1)
        }
    }

    /// The members of an APNs answer's body that APNs defines, as written:
    /// everything before the relay's own `"error"` object.
    static func apnsMembers(_ body: String) -> String {
        guard let cut = body.range(of: #","error":"#) else { return body }
        return String(body[..<cut.lowerBound])
    }

    @Test("a repeat answered from the audit row (the key's answer never recorded, its lease over) is APNs' answer too: 200 with the apns-id and apns-unique-id and no body, 410 Unregistered with the first answer's timestamp; nothing sent again")
    func recoveredFromAuditRow() async throws {
        let key = try APNsHTTP2IngressTests.BackendKey()
        defer { key.file.remove() }
        let url = try #require(ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"])
        let clock = ManualClock()
        try await APNsHTTP2IngressTests.withIngress(key: key, tls: false, databaseURL: url, configure: {
            $0.ingress.idempotencyClock = { clock.milliseconds }
        }) { relay, port, _ in
            let good = UUID().uuidString.lowercased()
            let gone = UUID().uuidString.lowercased()
            let dead = TestRelay.token(15, prefix: APNsHTTP2IngressTests.deadPrefix)
            let first = try await Self.send(port, key, token: TestRelay.token(14), apnsID: good)
            let refused = try await Self.send(port, key, token: dead, apnsID: gone)
            #expect(first.status == 200 && refused.status == 410, "\(first) \(refused)")
            let hashes = [good, gone].map { "'\(IdempotencyTests.keyHash("apns-id:" + $0))'" }.joined(separator: ",")
            #expect(await eventually(60) {
                let rows = try? await OutcomeAgreementTests.psql(url, "SELECT count(*) FROM apns_audit WHERE idempotency_key_hash IN (\(hashes))")
                return rows == [["2"]]
            }, "the audit rows did not reach the table")
            // The 410's row keeps APNs' timestamp (migration 0012), the success's none.
            let stamps = try await OutcomeAgreementTests.psql(
                url, "SELECT apns_id, coalesce((extract(epoch FROM apns_timestamp) * 1000)::bigint::text, 'null') FROM apns_audit WHERE apns_id IN ('\(good)', '\(gone)') ORDER BY apns_id = '\(gone)'")
            #expect(stamps == [[good, "null"], [gone, String(APNsHTTP2IngressTests.unregisteredAt)]], "\(stamps)")
            // As a relay that stopped before recording its answers leaves the keys: in flight, no answer kept.
            _ = try await OutcomeAgreementTests.psql(url, """
                UPDATE apns_idempotency_keys SET state = 'in_flight', apns_id = NULL, status = NULL, reason = NULL, attempts = NULL,
                    answer_status = NULL, answer_headers = NULL, answer_body = NULL
                WHERE key_hash IN (\(hashes))
                """)
            clock.advance(seconds: 3600)

            let again = try await Self.send(port, key, token: TestRelay.token(14), apnsID: good)
            #expect(again.status == 200 && again.body.isEmpty && again.headers["apns-id"] == good, "\(again) \(again.headers)")
            #expect(again.headers["apns-unique-id"] == first.headers["apns-unique-id"] && again.headers["apns-unique-id"] != nil, "\(again.headers)")
            #expect(again.headers["idempotency-replayed"] == "true")
            let repeated = try await Self.send(port, key, token: dead, apnsID: gone)
            #expect(repeated.status == 410 && repeated.headers["apns-id"] == gone, "\(repeated) \(repeated.headers)")
            #expect(repeated.json?["reason"]?.stringValue == "Unregistered", "\(repeated)")
            // APNs' timestamp of the first 410, from the audit row: the members APNs defines
            // (reason, timestamp) byte for byte as the first answer wrote them. The relay's own
            // error object after them says this one was answered from the row, so it differs.
            #expect(refused.json?["timestamp"] == .integer(APNsHTTP2IngressTests.unregisteredAt), "\(refused)")
            #expect(Self.apnsMembers(repeated.body) == Self.apnsMembers(refused.body), "first \(refused), repeat \(repeated)")
            #expect(Self.apnsMembers(refused.body) == #"{"reason":"Unregistered","timestamp":\#(APNsHTTP2IngressTests.unregisteredAt)"#)
            #expect(repeated.headers["content-type"] == refused.headers["content-type"])
            // Settled in APNs' shape: the next repeat reads the stored answer, the same.
            let third = try await Self.send(port, key, token: TestRelay.token(14), apnsID: good)
            #expect(third.status == 200 && third.body.isEmpty && third.headers["apns-id"] == good, "\(third)")
            let fourth = try await Self.send(port, key, token: dead, apnsID: gone)
            #expect(fourth.status == 410 && fourth.body == repeated.body, "settled \(fourth), answered from the row \(repeated)")
            #expect(Self.received(relay, apnsID: good) == 1 && Self.received(relay, apnsID: gone) == 1)
        }
    }
}
