import Audit
import Foundation
import Relay
import RelayBasics

extension AuditBenchmark {
    /// Writes `count` COPY lines of `apns_audit`, encoded by the writer's own
    /// code (`AuditRecord(event:)`, `copyLine()`), to `path`, and returns the
    /// column list they fill, in order.
    ///
    /// The rows are successful single sends finished 100 µs apart (10,000 a
    /// second, in order, as a busy relay's batches arrive), each with its own
    /// apns-id, token and trace, and latencies spread from 2 ms into seconds
    /// (so the latency index is filled at its real spread, not at one point).
    static func writeRows(_ count: Int, to path: String) throws -> String {
        let start = UnixTime.nowNanoseconds()
        var data = Data()
        data.reserveCapacity(count * 480)
        for index in 0..<count {
            var event = Self.event(index)
            event.finishedAt = start + UInt64(index) * 100_000
            // A long tail: most sends 2-3 ms, about 2% over 100 ms, 0.5% over a second.
            let spread = Double((index &* 7919) % 1000) / 1000
            event.latencySeconds = 0.002 + 3 * pow(spread, 200) + 0.001 * Double((index &* 104_729) % 997) / 997
            event.startedAt = event.finishedAt - UInt64(event.latencySeconds * 1e9)
            data.append(contentsOf: AuditRecord(event: event, relayInstance: "bench").copyLine())
        }
        try data.write(to: URL(fileURLWithPath: path))
        return AuditRecord.columns.joined(separator: ", ")
    }
}
