import APNs
import Foundation
import MockAPNs
import RelayJSON
import Synchronization
import Testing
import TestSupport

/// `Idempotency-Key` against real components: the relay on loopback, the
/// Postgres of scripts/test holding the keys, curl as the client and the
/// mock APNs counting what reached it.
@Suite("Idempotency keys")
struct IdempotencyTests {
    static var databaseURL: String? { ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] }

    /// A key no other test uses.
    static func newKey() -> String { "order-\(UUID().uuidString)" }

    /// The audit column's value for `key` sent by `caller`.
    static func keyHash(_ key: String, caller: String = "backend") -> String { Fingerprint.sha256Hex(Array("\(caller)\n\(key)".utf8)) }

    static func auditRows(_ url: String, key: String, caller: String = "backend") async throws -> [[String]] {
        try await OutcomeAgreementTests.psql(url, "SELECT apns_id, outcome FROM apns_audit WHERE idempotency_key_hash = '\(keyHash(key, caller: caller))'")
    }

    static func replays(_ relay: TestRelay) async throws -> Int {
        let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase)
        let line = scrape.body.split(separator: "\n").first { $0.hasPrefix(#"apns_relay_idempotent_replays_total{app="app-a"}"#) }
        return line.flatMap { Int(Double($0.split(separator: " ").last ?? "") ?? 0) } ?? 0
    }

    /// Runs `body` with a relay on the test database and a fresh key; nothing without the database.
    static func withKeyedRelay(rules: [MockRule] = [], _ body: (TestRelay, _ url: String, _ key: String) async throws -> Void) async throws {
        guard let url = databaseURL else { return }
        try await withRelay(rules: rules, databaseURL: url) { relay in try await body(relay, url, newKey()) }
    }

    @Test("a repeated key returns the first answer byte for byte, marked as a replay; APNs saw one request and the audit one row")
    func replay() async throws {
        try await Self.withKeyedRelay { relay, url, key in
            let body = TestRelay.send(token: TestRelay.token(11))
            let first = try await relay.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"])
            #expect(first.status == 200, "\(first)")
            #expect(first.headers["idempotency-replayed"] == nil)
            let second = try await relay.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"])
            #expect(second.status == 200)
            #expect(second.body == first.body)
            #expect(second.headers["apns-id"] == first.headers["apns-id"])
            #expect(second.headers["idempotency-replayed"] == "true")
            // The same request with its members in another order is the same request.
            let reordered = try #require(JSONParser.parse(Array(body.utf8)).objectValue)
            let shuffled = JSONValue.object(JSONObject(reordered.members.reversed().map { ($0.key, $0.value) })).encodedString()
            let third = try await relay.curl("POST", "/v1/send", body: shuffled, headers: ["Idempotency-Key: \(key)"])
            #expect(third.body == first.body && third.headers["idempotency-replayed"] == "true", "\(third)")
            #expect(relay.apnsRequests == 1)
            #expect(try await Self.replays(relay) == 2)

            // The first send's audit row carries the hashed key; the replays wrote none.
            #expect(await eventually { (try? await Self.auditRows(url, key: key).count) == 1 })
            let rows = try await Self.auditRows(url, key: key)
            #expect(rows.map { $0[0] } == [first.json?["apnsId"]?.stringValue ?? "?"])
            let raw = try await OutcomeAgreementTests.psql(url, "SELECT count(*) FROM apns_audit WHERE idempotency_key_hash = '\(key)'")
            #expect(raw == [["0"]], "the key itself is never stored")

            // Another caller's key with the same text is another key.
            let other = try await relay.curl("POST", "/v1/send", key: "admin", body: body, headers: ["Idempotency-Key: \(key)"])
            #expect(other.status == 200 && other.headers["idempotency-replayed"] == nil, "\(other)")
            #expect(other.headers["apns-id"] != first.headers["apns-id"])
            #expect(relay.apnsRequests == 2)
        }
    }

    @Test("a repeated key with another body is refused 422 IdempotencyKeyReused and nothing is sent")
    func reusedKey() async throws {
        try await Self.withKeyedRelay { relay, _, key in
            let first = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(21)), headers: ["Idempotency-Key: \(key)"])
            #expect(first.status == 200, "\(first)")
            let other = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(22)), headers: ["Idempotency-Key: \(key)"])
            #expect(other.status == 422, "\(other)")
            #expect(other.error?["type"] == "IdempotencyKeyReused")
            #expect(other.error?["field"] == "Idempotency-Key")
            let message = other.error?["message"]?.stringValue ?? ""
            #expect(message.contains(key) && message.contains("body differs"), "\(message)")
            #expect(relay.apnsRequests == 1)
        }
    }

    @Test("a key whose first request is still in flight answers 409 IdempotencyKeyInFlight with Retry-After, then the replay once it is answered")
    func inFlight() async throws {
        try await Self.withKeyedRelay(rules: [MockRule(.tokenPrefix("cafe"), always: .hold)]) { relay, _, key in
            let body = TestRelay.send(token: TestRelay.token(1, prefix: "cafe"))
            let first = Task { try await relay.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"]) }
            // The first send has reached APNs and is held there.
            #expect(await eventually { relay.mock.engine.heldCount == 1 })
            let second = try await relay.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"])
            #expect(second.status == 409, "\(second)")
            #expect(second.error?["type"] == "IdempotencyKeyInFlight")
            #expect(second.headers["retry-after"] == "1")
            #expect(relay.mock.engine.releaseHeld() == 1)
            let answered = try await first.value
            #expect(answered.status == 200, "\(answered)")
            let retried = try await relay.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"])
            #expect(retried.body == answered.body && retried.headers["idempotency-replayed"] == "true", "\(retried)")
            #expect(relay.apnsRequests == 1)
        }
    }

    @Test("two relays on one Postgres racing one key: exactly one APNs request, and both answers agree")
    func twoRelaysRace() async throws {
        guard let url = Self.databaseURL else { return }
        let hold = [MockRule(.tokenPrefix("cafe"), always: .hold)]
        let one = try await TestRelay.start(rules: hold, databaseURL: url)
        let two: TestRelay
        do { two = try await TestRelay.start(rules: hold, databaseURL: url) } catch {
            await one.stop()
            throw error
        }
        do {
            let key = Self.newKey()
            let body = TestRelay.send(token: TestRelay.token(2, prefix: "cafe"))
            let a = Task { try await one.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"]) }
            let b = Task { try await two.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"]) }
            // Exactly one relay won the claim and holds its send at its mock; the other refused.
            #expect(await eventually { one.mock.engine.heldCount + two.mock.engine.heldCount == 1 })
            let (winner, loser, winnerTask, loserTask) = one.mock.engine.heldCount == 1 ? (one, two, a, b) : (two, one, b, a)
            let refused = try await loserTask.value
            #expect(refused.status == 409 && refused.error?["type"] == "IdempotencyKeyInFlight", "\(refused)")
            winner.mock.engine.releaseHeld()
            let sent = try await winnerTask.value
            #expect(sent.status == 200, "\(sent)")
            let replayed = try await loser.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"])
            #expect(replayed.status == 200 && replayed.headers["idempotency-replayed"] == "true", "\(replayed)")
            #expect(replayed.body == sent.body)
            #expect(one.apnsRequests + two.apnsRequests == 1)
        } catch {
            await one.stop()
            await two.stop()
            throw error
        }
        await one.stop()
        await two.stop()
    }

    @Test("a key holds across a relay restart: the new relay replays and sends nothing")
    func restart() async throws {
        guard let url = Self.databaseURL else { return }
        let key = Self.newKey()
        let body = TestRelay.send(token: TestRelay.token(31))
        var first: TestRelay.Answer?
        try await withRelay(databaseURL: url) { relay in
            first = try await relay.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"])
            #expect(first?.status == 200, "\(String(describing: first))")
        }
        try await withRelay(databaseURL: url) { relay in
            let again = try await relay.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"])
            #expect(again.status == 200 && again.headers["idempotency-replayed"] == "true", "\(again)")
            #expect(again.body == first?.body)
            #expect(relay.apnsRequests == 0)
        }
    }

    @Test("past ingress.idempotency_window_seconds (an injected clock moved on) the key sends again")
    func windowExpiry() async throws {
        guard let url = Self.databaseURL else { return }
        let clock = ManualClock()
        try await withRelay(databaseURL: url, configure: { configuration in
            configuration.ingress.idempotencyWindowSeconds = 60
            configuration.ingress.idempotencyClock = { clock.milliseconds }
        }) { relay in
            let key = Self.newKey()
            let body = TestRelay.send(token: TestRelay.token(41))
            let first = try await relay.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"])
            clock.advance(seconds: 59)
            let within = try await relay.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"])
            #expect(within.headers["idempotency-replayed"] == "true" && within.body == first.body, "\(within)")
            clock.advance(seconds: 2)
            let after = try await relay.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"])
            #expect(after.status == 200 && after.headers["idempotency-replayed"] == nil, "\(after)")
            #expect(after.headers["apns-id"] != first.headers["apns-id"])
            #expect(relay.apnsRequests == 2)
            // The purge deletes what expired, within its bound.
            clock.advance(seconds: 61)
            let store = try #require(relay.server.idempotency)
            #expect(try await store.purgeExpired(limit: 1_000_000) >= 1)
            let left = try await OutcomeAgreementTests.psql(url, "SELECT count(*) FROM apns_idempotency_keys WHERE key_hash = '\(Self.keyHash(key))'")
            #expect(left == [["0"]])
        }
    }

    @Test("batch items with keys: replayed from an earlier request, and a key repeated in one batch sends once")
    func batch() async throws {
        guard let url = Self.databaseURL else { return }
        try await withRelay(databaseURL: url) { relay in
            let (a, b) = (Self.newKey(), Self.newKey())
            func item(_ token: Int, key: String?) -> String {
                let send = TestRelay.send(token: TestRelay.token(token))
                return key.map { String(send.dropLast()) + #","idempotencyKey":"\#($0)"}"# } ?? send
            }
            let body = #"{"items":[\#(item(51, key: a)),\#(item(52, key: b)),\#(item(51, key: a)),\#(item(53, key: b)),\#(item(54, key: nil))]}"#
            let answer = try await relay.curl("POST", "/v1/send/batch", body: body)
            #expect(answer.status == 200, "\(answer)")
            let results = answer.json?["results"]?.arrayValue ?? []
            #expect(results.count == 5)
            guard results.count == 5 else { return }
            #expect(results[0]["ok"] == true && results[0]["idempotentReplay"] == nil)
            #expect(results[1]["ok"] == true)
            #expect(results[2]["ok"] == true && results[2]["idempotentReplay"] == true, "\(results[2])")
            #expect(results[2]["apnsId"] == results[0]["apnsId"])
            #expect(results[3]["ok"] == false && results[3]["error"]?["type"] == "IdempotencyKeyReused", "\(results[3])")
            #expect(results[3]["error"]?["field"] == "items[3].idempotencyKey")
            #expect(results[4]["ok"] == true)
            #expect(relay.apnsRequests == 3)

            // The batch item's key holds for /v1/send with the same send.
            let single = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(51)), headers: ["Idempotency-Key: \(a)"])
            #expect(single.headers["idempotency-replayed"] == "true" && single.json?["apnsId"] == results[0]["apnsId"], "\(single)")
            // And for a later batch.
            let again = try await relay.curl("POST", "/v1/send/batch", body: #"{"items":[\#(item(52, key: b))]}"#)
            let replayed = again.json?["results"]?.arrayValue?.first
            #expect(replayed?["idempotentReplay"] == true && replayed?["apnsId"] == results[1]["apnsId"], "\(again)")
            #expect(relay.apnsRequests == 3)
            // A key names one send: not with a fan-out.
            let fanOut = try await relay.curl("POST", "/v1/send/batch", body: #"{"items":[{"app":"app-a","environment":"development","operation":"alert","tokens":["\#(TestRelay.token(55))"],"snapshot":\#(TestRelay.liveSnapshot),"idempotencyKey":"\#(Self.newKey())"}]}"#)
            #expect(fanOut.json?["results"]?.arrayValue?.first?["error"]?["field"] == "items[0].idempotencyKey", "\(fanOut)")
        }
    }

    @Test("a bad key is 400 naming the header or field and the rule; nothing is sent")
    func badKeys() async throws {
        try await withRelay { relay in
            let body = TestRelay.send(token: TestRelay.token(61))
            for (header, rule) in [
                ("Idempotency-Key: " + String(repeating: "k", count: 256), "1 to 255"),
                ("Idempotency-Key: caf\u{e9}", "printable ASCII"),
                ("Idempotency-Key;", "1 to 255"),
            ] {
                let answer = try await relay.curl("POST", "/v1/send", body: body, headers: [header])
                #expect(answer.status == 400, "\(header): \(answer)")
                #expect(answer.error?["field"] == "Idempotency-Key")
                #expect(answer.error?["message"]?.stringValue?.contains(rule) == true, "\(answer)")
                let device = try await relay.curl("POST", "/3/device/\(TestRelay.token(62))", body: #"{"aps":{"alert":"hi"}}"#, headers: [header, "apns-topic: com.example.a"])
                #expect(device.status == 400 && device.error?["field"] == "Idempotency-Key", "\(device)")
            }
            let batch = try await relay.curl("POST", "/v1/send/batch", body: #"{"items":[\#(String(body.dropLast()) + #","idempotencyKey":7}"#)]}"#)
            #expect(batch.json?["results"]?.arrayValue?.first?["error"]?["field"] == "items[0].idempotencyKey", "\(batch)")
            #expect(relay.apnsRequests == 0)
        }
    }

    @Test("a key with a byte that is not ASCII names that byte as sent (Latin-1 0xe9, not a byte of U+FFFD); a control character names Idempotency-Key as documented")
    func rawKeyBytes() async throws {
        try await withRelay { relay in
            let port = Int(relay.server.ingressAddress.port)
            let routes = [
                ("/v1/send", "content-type: application/json", TestRelay.send(token: TestRelay.token(63))),
                ("/3/device/\(TestRelay.token(64))", "apns-topic: com.example.a", #"{"aps":{"alert":"hi"}}"#),
            ]
            let keys: [([UInt8], String)] = [
                (Array("caf".utf8) + [0xE9], "must be printable ASCII (0x20-0x7E): found byte 0xe9 at byte 3"),
                (Array("caf".utf8) + [0xE9] + Array(String(repeating: "k", count: 252).utf8), "this one has 256 bytes"),
                (Array("ab".utf8) + [0x01] + Array("c".utf8), "header 'Idempotency-Key' has a control character in its value"),
            ]
            for (path, header, body) in routes {
                for (key, message) in keys {
                    let head = "POST \(path) HTTP/1.1\r\nHost: relay\r\nauthorization: Bearer \(TestRelay.keys["backend"]!)\r\n\(header)\r\n"
                        + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\nIdempotency-Key: "
                    let answer = try await IngressHardeningTests.raw(port, bytes: Array(head.utf8) + key + Array("\r\n\r\n\(body)".utf8))
                    #expect(answer.status == 400, "\(path) \(key): \(answer)")
                    #expect(answer.error?["field"] == "Idempotency-Key", "\(path) \(key): \(answer)")
                    #expect(answer.error?["message"]?.stringValue?.contains(message) == true, "\(path) \(key): \(answer)")
                }
            }
            #expect(relay.apnsRequests == 0)
        }
    }

    @Test("a batch item with idempotencyKey and tokens fails alone, as docs/api.md shows: a 200 batch, the item's one result a 400 InvalidRequest naming items[0].idempotencyKey; nothing of it is sent")
    func keyWithTokens() async throws {
        try await withRelay { relay in
            let tokens = [TestRelay.token(91), TestRelay.token(92)].map { "\"\($0)\"" }.joined(separator: ",")
            let keyed = #"{"app":"app-a","environment":"development","operation":"alert","tokens":[\#(tokens)],"snapshot":\#(TestRelay.liveSnapshot),"idempotencyKey":"\#(Self.newKey())"}"#
            let answer = try await relay.curl("POST", "/v1/send/batch", body: #"{"items":[\#(keyed),\#(TestRelay.send(token: TestRelay.token(93)))]}"#)
            #expect(answer.status == 200, "\(answer)")
            let results = answer.json?["results"]?.arrayValue ?? []
            #expect(results.count == 2, "one result for the refused item, one for the other: \(answer)")
            guard results.count == 2 else { return }
            #expect(results[0]["item"] == .integer(0) && results[0]["ok"] == false && results[0]["tokenIndex"] == nil, "\(results[0])")
            let error = results[0]["error"]
            // The error object of a 400 body: type, message, field (no status; only APNs' answers carry one).
            #expect(error?["type"] == "InvalidRequest" && error?["status"] == nil, "\(results[0])")
            #expect(error?["field"] == "items[0].idempotencyKey", "\(results[0])")
            #expect(error?["message"] == "items[0].idempotencyKey: names one send: give it with token, not tokens", "\(results[0])")
            #expect(results[1]["item"] == .integer(1) && results[1]["ok"] == true, "\(results[1])")
            let summary = answer.json?["summary"]
            #expect(summary?["total"] == .integer(2) && summary?["succeeded"] == .integer(1) && summary?["failed"] == .integer(1), "\(answer)")
            #expect(relay.apnsRequests == 1, "only the other item was sent")
        }
    }

    @Test("/3/device/{token} with a key: the replay carries the first apns-id and the replay header")
    func deviceCompatible() async throws {
        try await Self.withKeyedRelay { relay, _, key in
            let path = "/3/device/\(TestRelay.token(71))"
            let headers = ["Idempotency-Key: \(key)", "apns-topic: com.example.a", "apns-push-type: alert"]
            let first = try await relay.curl("POST", path, body: #"{"aps":{"alert":"hi"}}"#, headers: headers)
            #expect(first.status == 200 && first.headers["apns-id"] != nil, "\(first)")
            let second = try await relay.curl("POST", path, body: #"{"aps":{"alert":"hi"}}"#, headers: headers)
            #expect(second.status == 200 && second.headers["apns-id"] == first.headers["apns-id"], "\(second)")
            #expect(second.headers["idempotency-replayed"] == "true")
            // Another priority changes what APNs is sent: another request.
            let other = try await relay.curl("POST", path, body: #"{"aps":{"alert":"hi"}}"#, headers: headers + ["apns-priority: 5"])
            #expect(other.status == 422, "\(other)")
            #expect(relay.apnsRequests == 1)
        }
    }

    @Test("without a reachable store a keyed send is refused 503 and nothing is sent; a send without a key goes on")
    func storeUnavailable() async throws {
        // No database configured at all, then one that refuses connections.
        for databaseURL in [nil, "postgresql://apns@127.0.0.1:1/none?connect_timeout=2"] as [String?] {
            try await withRelay(databaseURL: databaseURL, configure: { $0.audit.migrateOnStart = false }) { relay in
                let keyed = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(81)), headers: ["Idempotency-Key: \(Self.newKey())"])
                #expect(keyed.status == 503 && keyed.error?["type"] == "Unavailable", "\(keyed)")
                #expect(keyed.headers["retry-after"] != nil)
                #expect(relay.apnsRequests == 0)
                let plain = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(82)))
                #expect(plain.status == 200, "\(plain)")
            }
        }
    }
}

/// A clock a test moves by hand (unix ms), for the idempotency store. It
/// starts in 2017, so a purge at its time never touches other tests' keys.
final class ManualClock: Sendable {
    private let now = Mutex<Int64>(1_500_000_000_000)
    var milliseconds: Int64 { now.withLock { $0 } }
    func advance(seconds: Int64) { now.withLock { $0 += seconds * 1000 } }
}
