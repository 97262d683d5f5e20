@testable import Audit
import Foundation
import Relay
import Testing

/// A batch chunk's completions journaled together (`sendsFinishedDurably`):
/// one append for all of them, each still its own record: its row queued
/// as one send's would be, its intent answered in the ledger. (`always` and
/// recovery of a group's unanswered intents: `AuditBatchIntentTests`.)
@Suite("Audit writer: a chunk's completions together")
struct AuditBatchCompletionTests {
    /// Every row the writer spooled, in order, as its fields; a row's
    /// random `id` (drawn per row, so two writers never agree on it) left out.
    static func spooledRows(_ directory: String, layout: AuditRowLayout) throws -> [[String]] {
        let spool = try AuditSpool(directory: directory)
        let id = try #require(layout.columns.firstIndex { $0.name == "id" })
        return try spool.segments().flatMap { try spool.read($0).records }.map { record in
            var fields = record.line.split(separator: 0x09, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            if record.kind == .audit { fields.remove(at: id) }
            return ["\(record.kind)"] + fields
        }
    }

    @Test("interval: the group is one append; the rows are those the sends journaled one by one would give", arguments: [1, 16])
    func intervalOneAppend(count: Int) async throws {
        let events = (0..<count).map { EventFactory.event($0, dead: $0 % 4 == 1) }
        let intents = events.map { SendIntent(send: $0.send, startedAt: $0.startedAt) }

        let oneByOne = temporaryDirectory()
        let single = try AuditJournalSyncTests.writer(.interval, directory: oneByOne)
        await single.sendsStarting(intents)
        for event in events { await single.sendFinishedDurably(event) }
        await single.shutdown()

        let directory = temporaryDirectory()
        let writer = try AuditJournalSyncTests.writer(.interval, directory: directory)
        await writer.sendsStarting(intents)
        let before = writer.statistics.journalCommits
        // Through the protocol, as the relay calls it: the writer's own, not the default that loops.
        let observer: any DurableSendObserver = writer
        await observer.sendsFinishedDurably(events)
        #expect(writer.statistics.journalCommits == before + 1, "one write for the whole group: \(writer.statistics)")
        await writer.shutdown()

        #expect(writer.statistics.spooled == count, "\(writer.statistics)")
        let layout = writer.configuration.rowLayout
        let rows = try Self.spooledRows(directory, layout: layout)
        #expect(rows.count == count + events.count { $0.deadToken != nil }, "each send's row and each dead token's upsert")
        #expect(rows == (try Self.spooledRows(oneByOne, layout: layout)), "the same rows, in the same order")
        #expect(AuditSpoolListing(directory).journalSegments == 0, "every intent was answered: the journal is trimmed")
    }
}
