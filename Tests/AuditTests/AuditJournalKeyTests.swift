@testable import Audit
import APNs
import Foundation
import Relay
import Testing

/// The journal key (`apns-id/started-at`) ties an intent to its completion
/// on disk, and an intent's `unknown` row id derives from it: a journal left
/// by one relay must recover with the same ids in the next, whatever build.
@Suite("Audit writer: the journal key")
struct AuditJournalKeyTests {
    /// Sends with fixed ids and starts (edge values of the digits), and the
    /// key text and `unknown` row id each had when these pins were taken.
    static let pinned: [(apnsID: String, startedAt: UInt64, key: String, rowID: String)] = [
        ("6e1f0a4c-0000-4000-8000-000000000001", 1_763_800_000_000_000_000,
         "6e1f0a4c-0000-4000-8000-000000000001/1763800000000000000", "4dfc4db8-b9aa-0928-4d35-777154deb304"),
        ("6e1f0a4c-0000-4000-8000-000000000002", 0, "6e1f0a4c-0000-4000-8000-000000000002/0",
         "f0d11021-b5d4-d678-faa2-22ca820517a4"),
        ("6e1f0a4c-0000-4000-8000-000000000003", 9, "6e1f0a4c-0000-4000-8000-000000000003/9",
         "e83be021-b0fe-0048-f2e6-f2ca7de7e534"),
        ("6e1f0a4c-0000-4000-8000-000000000004", 10, "6e1f0a4c-0000-4000-8000-000000000004/10",
         "5a06a338-c0c2-f263-8443-144ce0a8ffdf"),
        ("6e1f0a4c-0000-4000-8000-000000000005", UInt64(Int64.max),
         "6e1f0a4c-0000-4000-8000-000000000005/9223372036854775807",
         "1087111f-2df9-5231-6c8e-8b8728b70ed5"),
    ]

    static func send(_ index: Int) -> SendDescriptor {
        SendDescriptor(app: "alpha", environment: .production, operation: .alert, apnsID: APNsID(pinned[index].apnsID)!, topic: "com.example.app")
    }

    @Test("a journal written by today's sending path recovers in the next relay with the pinned key text and unknown row ids", arguments: AuditWriter.JournalSync.allCases)
    func recoveredIDsPinned(journalSync: AuditWriter.JournalSync) async throws {
        // The killed relay: its intents journaled as a send and a batch journal them.
        let killed = temporaryDirectory()
        let writer = try AuditJournalSyncTests.writer(journalSync, directory: killed)
        await writer.sendStarting(Self.send(0), startedAt: Self.pinned[0].startedAt)
        await writer.sendsStarting((1..<Self.pinned.count).map { SendIntent(send: Self.send($0), startedAt: Self.pinned[$0].startedAt) })
        // The journal as it stood when the relay died: copied before its shutdown settles it.
        let next = temporaryDirectory()
        try writer.copyJournal(to: next)
        await writer.shutdown()

        let records = try AuditSpool.journalRecords(in: next)
        #expect(records.map(\.kind) == Array(repeating: .sendIntent, count: Self.pinned.count))
        #expect(records.map(\.journalKeyText) == Self.pinned.map(\.key))

        // The next relay, with a database: it recovers the journal first.
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let recovering = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: next, relayInstance: "next"), logger: quietLogger())
        await recovering.shutdown()
        #expect(recovering.statistics.recoveredUnknown == Self.pinned.count, "\(recovering.statistics)")
        let rows = try database.scalar("SELECT string_agg(apns_id::text || ' ' || id::text, ',' ORDER BY apns_id) FROM apns_audit WHERE outcome = 'unknown'")
        #expect(rows == Self.pinned.map { "\($0.apnsID) \($0.rowID)" }.joined(separator: ","))
    }
}
