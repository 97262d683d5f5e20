import Audit
@testable import RelayServer
import Testing

/// `audit.journal_sync` and `audit.journal_sync_interval_ms`: read from the
/// file and the environment, checked, shown by `check-config`.
@Suite("Relay server configuration: audit journal sync")
struct AuditJournalSyncConfigurationTests {
    /// The smallest valid file, shared with the tracing block's tests.
    static let apps = TracingConfigurationTests.apps

    @Test("default interval every 10 ms; the file and APNS_RELAY_AUDIT_JOURNAL_SYNC set it; bad values name the field")
    func journalSync() throws {
        let defaults = try ServerConfiguration.parse(yaml: Self.apps, file: "/tmp/relay.yaml", environment: [:])
        #expect(defaults.audit.journalSync == .interval)
        #expect(defaults.audit.journalSyncIntervalMilliseconds == 10)
        #expect(defaults.maskedDescription.contains("  journal_sync: interval\n  journal_sync_interval_ms: 10\n"))

        let always = try ServerConfiguration.parse(
            yaml: Self.apps + "audit:\n  journal_sync: always\n  journal_sync_interval_ms: 25\n", file: "/tmp/relay.yaml", environment: [:])
        #expect(always.audit.journalSync == .always)
        #expect(always.audit.journalSyncIntervalMilliseconds == 25)
        #expect(always.maskedDescription.contains("  journal_sync: always\n"))

        let fromEnvironment = try ServerConfiguration.parse(
            yaml: Self.apps + "audit:\n  journal_sync: always\n", file: "/tmp/relay.yaml", environment: ["APNS_RELAY_AUDIT_JOURNAL_SYNC": "interval"])
        #expect(fromEnvironment.audit.journalSync == .interval)

        func failure(_ yaml: String, environment: [String: String] = [:]) -> ConfigurationError? {
            do {
                _ = try ServerConfiguration.parse(yaml: Self.apps + yaml, file: "/tmp/relay.yaml", environment: environment)
                return nil
            } catch {
                return error
            }
        }
        let sometimes = failure("audit:\n  journal_sync: sometimes\n")
        #expect(sometimes?.field == "audit.journal_sync")
        #expect(sometimes?.message.contains("interval or always") == true, "\(String(describing: sometimes))")
        for bad in ["0", "-5", "10001", "9223372036854775808", "0.5"] {
            #expect(failure("audit:\n  journal_sync_interval_ms: \(bad)\n")?.field == "audit.journal_sync_interval_ms", "journal_sync_interval_ms: \(bad)")
        }
        #expect(failure("", environment: ["APNS_RELAY_AUDIT_JOURNAL_SYNC": "fsync"])?.field == "APNS_RELAY_AUDIT_JOURNAL_SYNC")
    }
}
