import Relay
@testable import Telemetry
import Testing

/// A metric's `reason` label takes a bounded set of values, whatever APNs answers.
@Suite("Metric reason labels")
struct ReasonLabelTests {
    @Test("the relay's transport kinds, catalog reasons and its own error types pass; APNs text shaped like a transport reason is other")
    func bounded() {
        for kind in TransportError.Kind.known {
            #expect(RelayMetrics.reasonLabel("transport_\(kind.rawValue)") == "transport_\(kind.rawValue)")
        }
        #expect(RelayMetrics.reasonLabel("BadDeviceToken") == "BadDeviceToken")
        #expect(RelayMetrics.reasonLabel("deadline_exceeded") == "deadline_exceeded")
        #expect(RelayMetrics.reasonLabel(nil) == "none")
        // An APNs (or a proxy in front of it) answering {"reason":"transport_…"}:
        // its text is kept verbatim as the send's reason, and each distinct
        // one was a new series.
        for hostile in ["transport_", "transport_timeout2", "transport_\u{0}x", "transport_" + String(repeating: "z", count: 300)] {
            #expect(RelayMetrics.reasonLabel(hostile) == "other", "\(hostile.prefix(20))")
        }
    }
}
