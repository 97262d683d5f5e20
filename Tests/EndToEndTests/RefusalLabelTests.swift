import Foundation
import Testing

/// Issue 26: a refusal the relay answers is counted under its own `reason`,
/// not `other` (InvalidHeader and TopicNotForApp were `other` while the label
/// set was kept by hand; ReasonLabelTests covers every code, this the wire).
@Suite("Refusals in the metrics")
struct RefusalLabelTests {
    @Test("InvalidHeader and TopicNotForApp refusals are counted under their own reason in apns_relay_sends_total")
    func ownReason() async throws {
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let invalidHeader = try await relay.curl("POST", "/v1/send", body: IngressBadInputTests.raw(#","apns-topic":"com.example.a\u0000""#))
        #expect(invalidHeader.status == 400 && invalidHeader.body.contains("InvalidHeader"), "\(invalidHeader)")
        let foreignTopic = try await relay.curl("POST", "/v1/send", body: IngressBadInputTests.raw(#","apns-topic":"com.example.b""#))
        #expect(foreignTopic.status == 403 && foreignTopic.body.contains("TopicNotForApp"), "\(foreignTopic)")

        let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase).body
        let sends = scrape.split(separator: "\n").filter { $0.hasPrefix("apns_relay_sends_total{") }
        for reason in ["InvalidHeader", "TopicNotForApp"] {
            let line = sends.first { $0.contains(#"reason="\#(reason)""#) }
            #expect(line.map { $0.hasSuffix(" 1") || $0.hasSuffix(" 1.0") } == true, "\(reason): \(sends)")
        }
        #expect(!sends.contains { $0.contains(#"reason="other""#) }, "\(sends)")
    }
}
