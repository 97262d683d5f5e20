@testable import Audit
import Foundation
import Relay
import Testing

/// A single send's two records with `audit.journal_sync: interval`: each is
/// in the journal file (what another descriptor reads, what a killed process
/// leaves) the moment its call returns, before the first attempt leaves and
/// before the caller is answered.
@Suite("Audit journal: a single send's appends")
struct AuditJournalAppendTests {

    @Test("interval: the intent is in the journal file when sendStarting returns, the completion when sendFinishedDurably returns, each keyed to the send")
    func recordsInTheFileOnReturn() async throws {
        let directory = temporaryDirectory()
        // The writer takes no partial batch for a minute (shutdown takes it):
        // the completion's row is not spooled, so its segment is not trimmed
        // away before the test reads the journal.
        var configuration = AuditWriter.Configuration(conninfo: "", spoolDirectory: directory, relayInstance: "sync-interval")
        configuration.spoolOnly = true
        configuration.journalSync = .interval
        configuration.journalSyncInterval = 0.005
        configuration.flushInterval = 60
        let writer = try AuditWriter.started(configuration: configuration, logger: quietLogger())
        let event = EventFactory.event(7, dead: true)
        let key = AuditJournalKey(apnsID: event.send.apnsID.value, startedAt: event.startedAt).text

        await writer.sendStarting(event.send, startedAt: event.startedAt)
        let afterIntent = try AuditSpool.journalRecords(in: directory)
        #expect(afterIntent.map(\.kind) == [.sendIntent])
        #expect(afterIntent.map(\.journalKeyText) == [key])
        // The intent holds the send, from which recovery writes its `unknown` row.
        let unknownRow = AuditRecord(intent: event.send, startedAt: event.startedAt, relayInstance: writer.configuration.relayInstance).copyLine()
        #expect(try afterIntent.first.flatMap { try AuditJournal.row(of: $0, layout: .standard) }?.line == unknownRow)

        await writer.sendFinishedDurably(event)
        let afterCompletion = try AuditSpool.journalRecords(in: directory)
        #expect(afterCompletion.map(\.kind) == [.sendIntent, .sendCompletion, .deadToken])
        #expect(afterCompletion.prefix(2).map(\.journalKeyText) == [key, key])
        // The completion's record formats as the event's row, with the id it holds.
        let completionRow = try #require(try AuditJournal.row(of: afterCompletion[1], layout: .standard)).line
        var record = AuditRecord(event: event, relayInstance: writer.configuration.relayInstance)
        record.id = try #require(CopyText.field(0, of: completionRow))
        #expect(completionRow == record.copyLine())
        await writer.shutdown()
        #expect(writer.statistics.spooled == 1, "one row (the dead-token upsert is no audit row): \(writer.statistics)")
    }
}
