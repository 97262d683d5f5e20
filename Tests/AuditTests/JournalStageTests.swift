@testable import Audit
import Foundation
import Relay
import Testing
import TestSupport

/// The journal's stage (`audit.journal_sync: interval`): records the sending
/// threads copy into a mapped file, written to a segment by the journal
/// thread. What a killed relay leaves staged must be recovered, once.
@Suite("Audit journal: the stage")
struct JournalStageTests {
    /// A writer whose journal thread, once woken by the first append, writes
    /// the stage out again only 2 s later: records appended meanwhile are
    /// mostly still staged when the test copies the journal.
    static func slowSyncWriter(directory: String) throws -> AuditWriter {
        var configuration = AuditWriter.Configuration(conninfo: "", spoolDirectory: directory, relayInstance: "stage")
        configuration.spoolOnly = true
        configuration.journalSync = .interval
        configuration.journalSyncInterval = 2
        configuration.journalIdleWake = 2
        return try AuditWriter.started(configuration: configuration, logger: quietLogger())
    }

    @Test("a journal as a relay killed mid-run leaves it, records in its segments and its stage: each record in one of them, and the next start recovers every send once, answered ones as their rows, the rest as unknown")
    func stagedRecordsRecovered() async throws {
        let killed = temporaryDirectory()
        let writer = try Self.slowSyncWriter(directory: killed)
        let events = (0..<40).map { EventFactory.event($0) }
        for event in events { await writer.sendStarting(event.send, startedAt: event.startedAt) }
        for event in events[..<25] { await writer.sendFinishedDurably(event) }
        let next = temporaryDirectory()
        try writer.copyJournal(to: next)
        // Where each record is depends on when the journal thread last wrote
        // the stage out; that the stage alone is recovered is the tests below.
        let all = try AuditSpool.journalRecords(in: next)
        #expect(all.filter { $0.kind == .sendIntent }.count == 40 && all.filter { $0.kind == .sendCompletion }.count == 25, "each record once, segment or stage")
        await writer.shutdown()

        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let recovering = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: next, relayInstance: "next"), logger: quietLogger())
        await recovering.shutdown()
        #expect(recovering.statistics.recoveredCompleted == 25 && recovering.statistics.recoveredUnknown == 15, "\(recovering.statistics)")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "40")
        #expect(try database.scalar("SELECT count(DISTINCT apns_id) FROM apns_audit") == "40")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit WHERE outcome = 'unknown'") == "15")
        #expect(try JournalStage.records(inDirectory: next).isEmpty, "the stage is empty once recovered")
        #expect(try AuditSpool.journalRecords(in: next).isEmpty)
    }

    @Test("a stage an interval run left is recovered by a relay started with journal_sync: always too", arguments: AuditWriter.JournalSync.allCases)
    func leftoverRecoveredInEitherMode(journalSync: AuditWriter.JournalSync) async throws {
        let directory = temporaryDirectory()
        let events = (0..<5).map { EventFactory.event($0) }
        do {
            let stage = try JournalStage(directory: directory)
            var bytes: [UInt8] = []
            for record in AuditJournalTests.journalRecords(intents: events, completions: Array(events[..<3])) { AuditSpool.encode(record, into: &bytes) }
            stage.append(bytes)
        }
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        var configuration = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "next")
        configuration.journalSync = journalSync
        let recovering = try AuditWriter.started(configuration: configuration, logger: quietLogger())
        await recovering.shutdown()
        #expect(recovering.statistics.recoveredCompleted == 3 && recovering.statistics.recoveredUnknown == 2, "\(recovering.statistics)")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "5")
        #expect(try JournalStage.records(inDirectory: directory).isEmpty)
    }

    @Test("records both in a segment and still in the stage (killed between writing the stage out and emptying it) land once: no completion twice, no intent read again after its completion taken for an unfinished send")
    func writtenOutAndStillStaged() async throws {
        let directory = temporaryDirectory()
        let events = (0..<6).map { EventFactory.event($0) }
        let records = AuditJournalTests.journalRecords(intents: events, completions: Array(events[..<4]))
        // The segment holds every record; the stage all of them again, as written out.
        let journal = try AuditSpool(directory: directory, prefix: "journal-", suffix: ".journal")
        try journal.append(records)
        journal.sealCurrent()
        do {
            let stage = try JournalStage(directory: directory)
            var bytes: [UInt8] = []
            for record in records { AuditSpool.encode(record, into: &bytes) }
            stage.append(bytes)
        }
        #expect(try JournalStage.records(inDirectory: directory).count == records.count)

        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let recovering = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "next"), logger: quietLogger())
        await recovering.shutdown()
        #expect(recovering.statistics.recoveredCompleted == 4 && recovering.statistics.recoveredUnknown == 2, "\(recovering.statistics)")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "6")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit WHERE outcome = 'unknown'") == "2")
        #expect(try database.scalar("SELECT count(DISTINCT apns_id) FROM apns_audit") == "6")
    }

    @Test("emptying the stage zeroes it: a shorter fill after a longer one reads as itself, not as the longer one's tail")
    func emptiedStageHoldsNoOldRecords() throws {
        let directory = temporaryDirectory()
        let stage = try JournalStage(directory: directory)
        func bytes(_ records: [AuditSpool.Record]) -> [UInt8] {
            var bytes: [UInt8] = []
            for record in records { AuditSpool.encode(record, into: &bytes) }
            return bytes
        }
        let long = (0..<10).map { AuditSpool.Record(kind: .audit, line: Array("row \($0)\n".utf8)) }
        stage.append(bytes(long))
        #expect(try JournalStage.records(inDirectory: directory) == long)
        stage.reset()
        let short = [AuditSpool.Record(kind: .audit, line: Array("new\n".utf8))]
        stage.append(bytes(short))
        #expect(try JournalStage.records(inDirectory: directory) == short)
        // A stage mapped again (the next start) counts what it holds.
        let reopened = try JournalStage(directory: directory)
        #expect(reopened.used == bytes(short).count)
    }

    @Test("once every row is written the journal's segments are deleted and its stage unmapped: nothing in the spool directory is open for writing")
    func stageUnmappedWhenSettled() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        var configuration = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "idle")
        configuration.journalSyncInterval = 0.005
        configuration.journalIdleWake = 0.01
        let writer = try AuditWriter.started(configuration: configuration, logger: quietLogger())
        for event in (0..<20).map({ EventFactory.event($0) }) {
            await writer.sendStarting(event.send, startedAt: event.startedAt)
            await writer.sendFinishedDurably(event)
        }
        #expect(await eventually(30) { writer.shared.withState { _ in writer.journal.stage == nil && writer.journal.files.segments().isEmpty } })
        await writer.shutdown()
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "20")
    }

    @Test("a full disk: once the stage cannot be written out the journal stays failing while in-flight sends' completions are copied into the stage (a copy says nothing about the disk), takes sends again only once the disk takes what is staged, and loses nothing")
    func fullDiskStaysFailingUntilTheStageIsWritten() async throws {
        guard let spool = await SmallSpool.mount(megabytes: 2) else {
            Issue.record("a tmpfs cannot be mounted here (not root?): this case needs one")
            return
        }
        do {
            try await Self.fullDisk(spool)
        } catch {
            await spool.unmount()
            throw error
        }
        await spool.unmount()
    }

    static func fullDisk(_ spool: SmallSpool) async throws {
        var configuration = AuditWriter.Configuration(conninfo: "", spoolDirectory: spool.path, relayInstance: "full")
        configuration.spoolOnly = true
        configuration.journalSyncInterval = 0.005
        configuration.journalIdleWake = 0.01
        let writer = try AuditWriter.started(configuration: configuration, logger: quietLogger())
        let events = (0..<36).map { EventFactory.event($0) }
        // Ten sends done and spooled: their journal segment settled and deleted.
        for event in events[..<10] {
            #expect(await writer.sendStarting(event.send, startedAt: event.startedAt))
            await writer.sendFinishedDurably(event)
        }
        #expect(await eventually(30) { spool.journalFiles.isEmpty })
        // Twenty-five more in flight, their intents written out, when the disk fills.
        for event in events[10..<35] { #expect(await writer.sendStarting(event.send, startedAt: event.startedAt)) }
        #expect(await eventually(30) { stageEmpty(writer) })
        try await spool.fill()
        // Fifteen completions: more bytes than the slack a file's last page
        // can have (under 4 KiB), so writing them out needs a page the full
        // disk does not have, whatever the segment's length.
        for event in events[10..<25] { await writer.sendFinishedDurably(event) }
        #expect(await eventually(30) { writer.statistics.journalFailing }, "writing the stage out failed on the full disk")
        // The rest finish while it fails: copied into the stage, no write.
        for event in events[25..<35] { await writer.sendFinishedDurably(event) }
        #expect(writer.statistics.journalFailing, "a copy into the stage cleared the journal's failure")
        #expect(await writer.sendStarting(events[35].send, startedAt: events[35].startedAt) == false, "a new send is refused")
        #expect(!stageEmpty(writer), "the completions wait in the stage")

        spool.free()
        let late = EventFactory.event(36)
        #expect(await eventually(60) { await writer.sendStarting(late.send, startedAt: late.startedAt) }, "taken again once the disk has room")
        #expect(writer.statistics.journalFailing == false)
        await writer.sendFinishedDurably(late)
        await writer.shutdown()

        // Every send taken has its row once, from the spool and the journal.
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let recovering = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: spool.path, relayInstance: "full"), logger: quietLogger())
        await recovering.shutdown()
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "36")
        #expect(try database.scalar("SELECT count(DISTINCT apns_id) FROM apns_audit") == "36")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit WHERE outcome = 'unknown'") == "0")
    }

    static func stageEmpty(_ writer: AuditWriter) -> Bool {
        writer.shared.withState { _ in (writer.journal.stage?.used ?? 0) == 0 }
    }
}
