import APNs
import Logging
import Relay
import Synchronization
import Testing

/// Collects log messages in memory.
final class CapturingLogHandler: LogHandler, @unchecked Sendable {
    // Mutated only under `lock`.
    private let lock = Mutex<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    var messages: [String] { lock.withLock { $0 } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lock.withLock { $0.append("\(event.level): \(event.message)") }
    }
}

@Suite("Clock skew")
struct ClockSkewTests {
    @Test("reports the skew and warns once past five minutes")
    func warnsOnce() {
        let handler = CapturingLogHandler()
        let monitor = ClockSkewMonitor(logger: Logger(label: "test") { _ in handler })
        let apnsTime: Int64 = 1_700_000_000
        #expect(monitor.observe(dateHeader: HTTPDate.format(apnsTime), now: apnsTime + 120) == 120)
        #expect(handler.messages.isEmpty)
        #expect(monitor.observe(dateHeader: HTTPDate.format(apnsTime), now: apnsTime - 400) == -400)
        #expect(monitor.observe(dateHeader: HTTPDate.format(apnsTime), now: apnsTime + 900) == 900)
        #expect(handler.messages.count == 1)
        #expect(handler.messages[0].hasPrefix("warning:"))
        #expect(monitor.latestSkewSeconds == 900)
        #expect(monitor.observe(dateHeader: "garbage", now: apnsTime) == nil)
        #expect(monitor.latestSkewSeconds == 900)
    }
}
