@testable import Audit
import Foundation
import Relay
import Testing
import TestSupport

/// `audit.journal_sync`: when a journal record counts as durable, held by the
/// writer's own counters (never by how long anything took).
@Suite("Audit writer: journal sync modes")
struct AuditJournalSyncTests {
    /// A writer without a database (rows go to the spool), in `mode`.
    static func writer(_ mode: AuditWriter.JournalSync, directory: String = temporaryDirectory()) throws -> AuditWriter {
        var configuration = AuditWriter.Configuration(conninfo: "", spoolDirectory: directory, relayInstance: "sync-\(mode.rawValue)")
        configuration.spoolOnly = true
        configuration.journalSync = mode
        configuration.journalSyncInterval = 0.005
        configuration.journalIdleWake = 0.01
        return try AuditWriter.started(configuration: configuration, logger: quietLogger())
    }

    @Test("interval: the journal's fdatasyncs grow while records are appended, and stop while it is idle")
    func intervalSyncsOnlyWhatWasWritten() async throws {
        let writer = try Self.writer(.interval)
        var index = 0
        for round in 0..<3 {
            let before = writer.statistics.journalSyncs
            for _ in 0..<40 {
                let event = EventFactory.event(index)
                index += 1
                await writer.sendStarting(event.send, startedAt: event.startedAt)
                await writer.sendFinishedDurably(event)
            }
            #expect(writer.statistics.journalCommits == index * 2, "one append per record, on the caller")
            let synced = await eventually(60) { let s = writer.statistics; return s.journalSyncs > before && s.journalUnsynced == 0 }
            #expect(synced, "round \(round): the appends were synced: \(writer.statistics)")
        }
        // Idle: the journal thread keeps looking, and syncs nothing.
        let idle = writer.statistics
        #expect(idle.journalUnsynced == 0)
        let looked = await eventually(60) { writer.statistics.journalSyncChecks >= idle.journalSyncChecks + 5 }
        #expect(looked, "the journal thread wakes while idle: \(writer.statistics)")
        #expect(writer.statistics.journalSyncs == idle.journalSyncs, "no fdatasync without an append: \(writer.statistics)")
        #expect(writer.statistics.journalSyncs <= writer.statistics.journalSyncChecks)

        // Another append: synced again.
        let event = EventFactory.event(index)
        await writer.sendStarting(event.send, startedAt: event.startedAt)
        #expect(await eventually(60) { writer.statistics.journalSyncs > idle.journalSyncs })
        await writer.sendFinishedDurably(event)
        await writer.shutdown()
        #expect(writer.statistics.spooled == index + 1, "\(writer.statistics)")
        #expect(writer.statistics.journalUnsynced == 0, "a clean stop syncs what is left")
    }

    @Test("always: a send resumes only after the group holding its record was fdatasynced")
    func alwaysResumesAfterSync() async throws {
        let directory = temporaryDirectory()
        let writer = try Self.writer(.always, directory: directory)
        for index in 0..<40 {
            let event = EventFactory.event(index)
            let beforeIntent = writer.statistics.journalSyncs
            await writer.sendStarting(event.send, startedAt: event.startedAt)
            let afterIntent = writer.statistics
            #expect(afterIntent.journalSyncs > beforeIntent, "send \(index): its intent resumed before a sync: \(afterIntent)")
            await writer.sendFinishedDurably(event)
            #expect(writer.statistics.journalSyncs > afterIntent.journalSyncs, "send \(index): its completion resumed before a sync")
            #expect(writer.statistics.journalSyncs >= writer.statistics.journalCommits, "every group acknowledged was synced")
        }
        await writer.shutdown()
        #expect(writer.statistics.spooled == 40, "\(writer.statistics)")
        #expect(AuditSpoolListing(directory).journalSegments == 0)
    }
}
