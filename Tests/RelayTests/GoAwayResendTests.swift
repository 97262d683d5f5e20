import APNs
import HTTP2
import MockAPNs
import Relay
import Testing

/// GOAWAY resends have one owner, the HTTP/2 pool, with one bound: checked
/// through the whole client over TLS HTTP/2 to the mock APNs on loopback.
@Suite("GOAWAY resends over the real pool")
struct GoAwayResendTests {
    /// The pool's resends of one request the server left unprocessed.
    static let resendBound = HTTP2Pool.Configuration(
        connection: HTTP2Connection.Configuration(host: "127.0.0.1", port: 0)).maximumUnprocessedResends

    @Test("GOAWAY-unprocessed resends cost no retry budget")
    func unprocessed() async throws {
        let wire = try WireFixture(rules: [MockRule(.any, [.goAway(graceful: false), .goAway(graceful: false), .succeed])]) {
            $0.retryPolicy.maxRetries = 0
        }
        let result = try await wire.client.send(try wire.builder.alert(token: String(repeating: "ab", count: 32), payload: ["aps": ["alert": "x"]]))
        #expect(result.status == 200)
        #expect(wire.mock.engine.log.total == 3)
        #expect(result.attempts == 1, "a request APNs never processed is no attempt")
        await wire.stop()
    }

    @Test("a server that GOAWAYs every request: exactly 1 + the pool's bound transmissions, one attempt, one transport_unprocessed result")
    func bound() async throws {
        #expect(Self.resendBound == 5)
        let wire = try WireFixture(rules: [MockRule(.any, always: .goAway(graceful: false))])
        let request = try wire.builder.alert(token: String(repeating: "cd", count: 32), payload: ["aps": ["alert": "x"]])
        let failure = try #require(await transportFailure(of: wire.client, request))
        #expect(failure.error.kind == .unprocessed)
        #expect(failure.error.message.hasSuffix("(sent \(1 + Self.resendBound) time(s), never processed)"), "\(failure.error)")
        #expect(failure.attempts == 1)
        // With the retry budget of 3 untouched: the send loop does not resend it again.
        #expect(wire.mock.engine.log.total == 1 + Self.resendBound)
        #expect(wire.mock.engine.log.attempts(apnsID: request.apnsID.value).count == 1 + Self.resendBound)
        let sends = wire.observer.sendEvents
        #expect(sends.map(\.outcome) == [.failed])
        #expect(sends.map(\.errorType) == ["transport_unprocessed"])
        #expect(wire.observer.attemptEvents.count == 1)
        await wire.stop()
    }
}
