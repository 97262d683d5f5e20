import Foundation
import MockAPNs
import Testing
import TestSupport

/// The retry rule for an attempt APNs may have taken (the whole request went
/// out and no answer came back), against the real HTTP/2 client over TLS and
/// the mock APNs counting what reached it: a send without a key is resent
/// (at least once, as the SDK does), a keyed send and a broadcast are not
/// (a key promises one push; a second broadcast reaches every subscriber),
/// and an attempt that never went out is resent for every send.
@Suite("At most once: no resend of an attempt APNs may have taken")
struct AtMostOnceRetryTests {
    /// A relay whose attempts give up after half a second without an answer
    /// (the mock's `.noAnswer` never answers), so a timeout is the event the
    /// test waits on, not a sleep.
    static func withShortTimeoutRelay(
        rules: [MockRule], databaseURL: String? = nil, origin port: Int? = nil, _ body: (TestRelay) async throws -> Void
    ) async throws {
        try await withRelay(rules: rules, databaseURL: databaseURL, configure: { configuration in
            configuration.apns.requestTimeoutSeconds = 0.5
            if let port { configuration.apns.origins[.development]?.port = port }
        }, body)
    }

    /// Requests the mock saw whose path starts with `prefix`.
    static func seen(_ relay: TestRelay, pathPrefix prefix: String) -> Int {
        relay.mock.engine.log.entries.filter { $0.request.path.hasPrefix(prefix) }.count
    }

    @Test("a send without a key whose first attempt APNs never answered is resent, and the mock saw it twice")
    func unkeyedIsResent() async throws {
        let token = TestRelay.token(1, prefix: "a1")
        try await Self.withShortTimeoutRelay(rules: [MockRule(.tokenPrefix("a1"), [.noAnswer, .succeed])]) { relay in
            let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: token))
            #expect(answer.status == 200, "\(answer)")
            #expect(answer.json?["attempts"]?.integerValue == 2)
            let apnsID = try #require(answer.headers["apns-id"])
            #expect(relay.mock.engine.log.attempts(apnsID: apnsID).count == 2)
        }
    }

    @Test("a keyed send whose attempt APNs never answered is not resent: 502 saying APNs may have it, the mock saw it once, a repeat replays the answer")
    func keyedIsNotResent() async throws {
        guard let url = IdempotencyTests.databaseURL else { return }
        let token = TestRelay.token(2, prefix: "a2")
        let key = IdempotencyTests.newKey()
        try await Self.withShortTimeoutRelay(rules: [MockRule(.tokenPrefix("a2"), [.noAnswer, .succeed])], databaseURL: url) { relay in
            let body = TestRelay.send(token: token)
            let answer = try await relay.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"])
            #expect(answer.status == 502, "\(answer)")
            #expect(answer.error?["type"]?.stringValue == "Upstream")
            let message = answer.error?["message"]?.stringValue ?? ""
            #expect(message.hasPrefix("APNs did not answer"), "\(message)")
            #expect(message.contains("not resent"), "\(message)")
            #expect(answer.error?["attempts"]?.integerValue == 1)
            #expect(Self.seen(relay, pathPrefix: "/3/device/") == 1)
            // The key keeps that answer: repeating it sends nothing more.
            let repeated = try await relay.curl("POST", "/v1/send", body: body, headers: ["Idempotency-Key: \(key)"])
            #expect(repeated.status == 502 && repeated.headers["idempotency-replayed"] == "true", "\(repeated)")
            #expect(Self.seen(relay, pathPrefix: "/3/device/") == 1)
            #expect(await eventually { (try? await IdempotencyTests.auditRows(url, key: key))?.map { $0[1] } == ["failed"] })
        }
    }

    @Test("a broadcast whose attempt APNs never answered is not resent: 502, and the mock saw the broadcast once")
    func broadcastIsNotResent() async throws {
        try await Self.withShortTimeoutRelay(rules: [MockRule(.pathPrefix("/4/broadcasts/"), [.noAnswer, .succeed])]) { relay in
            let created = try await relay.curl("POST", "/v1/channels", body: #"{"app":"app-a","environment":"development","storagePolicy":"no-storage"}"#)
            #expect(created.status == 201, "\(created)")
            let channelID = try #require(created.json?["channelId"]?.stringValue)
            let broadcast = #"{"app":"app-a","environment":"development","operation":"broadcast","channelId":"\#(channelID)","snapshot":\#(TestRelay.liveSnapshot)}"#
            let answer = try await relay.curl("POST", "/v1/send", body: broadcast)
            #expect(answer.status == 502, "\(answer)")
            #expect(answer.error?["message"]?.stringValue?.hasPrefix("APNs did not answer") == true, "\(answer)")
            #expect(answer.error?["attempts"]?.integerValue == 1)
            #expect(Self.seen(relay, pathPrefix: "/4/broadcasts/") == 1)
        }
    }

    @Test("a keyed send whose attempts never left (the origin refuses connections) is still retried: every attempt made, 502 could not be reached")
    func neverSentIsRetried() async throws {
        guard let url = IdempotencyTests.databaseURL else { return }
        let closedPort = Int(try await HAProxyBalancer.freePort())
        try await Self.withShortTimeoutRelay(rules: [], databaseURL: url, origin: closedPort) { relay in
            let answer = try await relay.curl(
                "POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(3)), headers: ["Idempotency-Key: \(IdempotencyTests.newKey())"])
            #expect(answer.status == 502, "\(answer)")
            #expect(answer.error?["message"]?.stringValue?.hasPrefix("APNs could not be reached") == true, "\(answer)")
            // Every attempt the policy allows: an alert is priority 10, whose
            // retries are clamped to 2 (retry.max_retries is 3).
            #expect(answer.error?["attempts"]?.integerValue == 3, "\(answer)")
        }
    }
}
