@testable import Audit
import Foundation
import Relay
import Testing

/// A batch's intents journaled together (`sendsStarting`): one append for
/// all of them, durable by the mode's promise before the call returns, each
/// still its own record that recovery answers on its own.
@Suite("Audit writer: a batch's intents together")
struct AuditBatchIntentTests {
    @Test("interval: many intents are one append on the caller; each is its own journal record", arguments: [1, 100])
    func intervalOneAppend(count: Int) async throws {
        let directory = temporaryDirectory()
        let writer = try AuditJournalSyncTests.writer(.interval, directory: directory)
        let events = (0..<count).map { EventFactory.event($0) }
        let before = writer.statistics.journalCommits
        // Through the protocol, as the relay calls it: the writer's own, not the default that loops.
        let observer: any DurableSendObserver = writer
        await observer.sendsStarting(events.map { SendIntent(send: $0.send, startedAt: $0.startedAt) })
        #expect(writer.statistics.journalCommits == before + 1, "one write for the whole group: \(writer.statistics)")
        // In the journal (the page cache) before the call returned, one intent record per send, in order.
        let records = try AuditSpool.journalRecords(in: directory)
        #expect(records.map(\.kind) == Array(repeating: .sendIntent, count: count))
        let keys = records.map(\.journalKeyText)
        #expect(keys == events.map { AuditJournalKey(apnsID: $0.send.apnsID.value, startedAt: $0.startedAt).text })
        for event in events { await writer.sendFinishedDurably(event) }
        await writer.shutdown()
        #expect(writer.statistics.spooled == count, "\(writer.statistics)")
        #expect(AuditSpoolListing(directory).journalSegments == 0, "every intent was answered: the journal is trimmed")
    }

    @Test("always: the group returns only once it was fdatasynced, in one group commit; so does a group of completions (sendsFinishedDurably)")
    func alwaysSyncedBeforeReturn() async throws {
        let writer = try AuditJournalSyncTests.writer(.always)
        let events = (0..<50).map { EventFactory.event($0) }
        let before = writer.statistics
        await writer.sendsStarting(events.map { SendIntent(send: $0.send, startedAt: $0.startedAt) })
        let after = writer.statistics
        #expect(after.journalSyncs > before.journalSyncs, "resumed before a sync: \(after)")
        #expect(after.journalCommits == before.journalCommits + 1, "the intents were handed over together: one group: \(after)")
        for event in events[0..<34] { await writer.sendFinishedDurably(event) }
        let grouped = writer.statistics
        await writer.sendsFinishedDurably(Array(events[34...]))
        let completed = writer.statistics
        #expect(completed.journalSyncs > grouped.journalSyncs, "completions resumed before a sync: \(completed)")
        #expect(completed.journalCommits == grouped.journalCommits + 1, "the completions were handed over together: one group: \(completed)")
        await writer.shutdown()
        #expect(writer.statistics.spooled == 50, "\(writer.statistics)")
    }

    @Test(
        "intents of a group never answered are recovered one by one as outcome unknown, whether the others' completions came one by one or as a group",
        arguments: AuditWriter.JournalSync.allCases, [false, true])
    func unansweredRecovered(journalSync: AuditWriter.JournalSync, completionsGrouped: Bool) async throws {
        let directory = temporaryDirectory()
        let writer = try AuditJournalSyncTests.writer(journalSync, directory: directory)
        let events = (0..<10).map { EventFactory.event($0) }
        await writer.sendsStarting(events.map { SendIntent(send: $0.send, startedAt: $0.startedAt) })
        if completionsGrouped {
            await writer.sendsFinishedDurably(Array(events[0..<6]))
        } else {
            for event in events[0..<6] { await writer.sendFinishedDurably(event) }
        }
        await writer.shutdown()
        #expect(writer.statistics.spooled == 6)
        #expect(AuditSpoolListing(directory).journalSegments > 0, "four intents are still open: their segment stays")
        // The next start finds the four open intents (as after a crash).
        let next = try AuditJournalSyncTests.writer(journalSync, directory: directory)
        await next.shutdown()
        #expect(next.statistics.recoveredUnknown == 4, "\(next.statistics)")
        #expect(next.statistics.recoveredCompleted == 6)
    }
}
