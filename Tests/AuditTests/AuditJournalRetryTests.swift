@testable import Audit
import APNs
import Foundation
import Relay
import Testing

/// A send's retries in the journal: a relay killed during a send recovers it
/// with every attempt that may have reached APNs (issue 28.3).
@Suite("Audit journal: attempts of an unfinished send")
struct AuditJournalRetryTests {
    static func send(_: Int) -> SendDescriptor {
        SendDescriptor(app: "alpha", environment: .production, operation: .alert, apnsID: APNsID.random(), topic: "com.example.app")
    }

    @Test("intents and retries of unfinished sends recover as one unknown row each, saying the attempts journaled (1 for the intent alone); the journal holds nothing once every send finished",
          arguments: AuditWriter.JournalSync.allCases)
    func retriesRecovered(journalSync: AuditWriter.JournalSync) async throws {
        let killed = temporaryDirectory()
        let writer = try AuditJournalSyncTests.writer(journalSync, directory: killed)
        let sends = (0..<3).map(Self.send)
        // A second apart, so the rows sort by start.
        let started = (0..<3).map { 1_764_000_000_000_000_000 + UInt64($0) * 1_000_000_000 }
        for (index, send) in sends.enumerated() { await writer.sendStarting(send, startedAt: started[index]) }
        await writer.sendRetrying(sends[1], startedAt: started[1], attempt: 2)
        await writer.sendRetrying(sends[2], startedAt: started[2], attempt: 2)
        await writer.sendRetrying(sends[2], startedAt: started[2], attempt: 3)
        // The journal as it stood when the relay died.
        let next = temporaryDirectory()
        try writer.copyJournal(to: next)
        #expect(try AuditSpool.journalRecords(in: next).map(\.kind) == Array(repeating: .sendIntent, count: 6))
        // The sends finish after all: their completions settle every record (the superseded intents too).
        for (index, send) in sends.enumerated() {
            await writer.sendFinishedDurably(SendEvent(
                send: send, outcome: .success, status: 200, reason: nil, errorType: nil, attempts: index + 1, trapHits: [],
                latencySeconds: 0.01, startedAt: started[index], finishedAt: started[index] + 10_000_000, apnsUniqueID: nil,
                unregisteredAt: nil, dropsToken: false, attemptLog: [], deadToken: nil))
        }
        await writer.shutdown()
        #expect(try AuditSpool.journalRecords(in: killed).isEmpty, "a retry's intent left a segment unsettled")

        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let recovering = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: next, relayInstance: "next"), logger: quietLogger())
        await recovering.shutdown()
        #expect(recovering.statistics.recoveredUnknown == 3, "\(recovering.statistics)")
        let rows = try database.scalar("""
            SELECT string_agg(apns_id || ' ' || attempts || ' ' || retried || ' ' || error_type, ',' ORDER BY started_at) FROM apns_audit WHERE outcome = 'unknown'
            """)
        #expect(rows == zip(sends, [(1, false), (2, true), (3, true)]).map { "\($0.apnsID.value) \($1.0) \($1.1) relay_stopped" }.joined(separator: ","))
    }
}
