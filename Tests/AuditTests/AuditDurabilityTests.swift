@testable import Audit
import APNs
import Foundation
import Relay
import Testing

@Suite("Audit writer: poisoned rows")
struct AuditPoisonTests {
    @Test("a NUL in a topic or snapshot id cannot poison a batch: every row lands, NUL stored as U+FFFD")
    func nulBytes() async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        var configuration = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "nul")
        configuration.reconnectMinimumDelay = 0.01
        let writer = try AuditWriter.started(configuration: configuration, logger: quietLogger())
        var events = (0..<200).map { EventFactory.event($0) }
        events[17].send.topic = "com.example.app\u{0}evil"
        events[18].send.snapshotID = "snap\u{0}"
        for event in events { await writer.sendFinishedDurably(event) }
        await writer.shutdown()
        #expect(writer.statistics.written == 200, "\(writer.statistics)")
        #expect(writer.statistics.spooled == 0)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "200")
        #expect(try database.scalar("SELECT topic FROM apns_audit WHERE apns_id = '\(events[17].send.apnsID.value)'") == "com.example.app\u{FFFD}evil")
    }

    @Test("a NUL in an APNs reason (an APNs answering {\"reason\":\"…\\u0000…\"}) cannot cost the send its row, live or replayed from the spool: the attempt log holds U+FFFD (jsonb refuses \\u0000)")
    func nulInReason() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        func refused(_ index: Int) -> SendEvent {
            var event = EventFactory.event(index)
            event.outcome = .rejected
            event.status = 400
            event.reason = "Bad\u{0}Reason"
            event.errorType = "Bad\u{0}Reason"
            event.attemptLog = [AttemptSummary(status: 400, reason: "Bad\u{0}Reason", durationSeconds: 0.003)]
            return event
        }
        let live = try AuditWriter.started(
            configuration: .init(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "nul-reason"), logger: quietLogger())
        await live.sendFinishedDurably(refused(1))
        await live.shutdown()
        #expect(live.statistics.written == 1, "\(live.statistics)")
        #expect(live.statistics.quarantined == 0)

        // Spooled while Postgres was away, then replayed.
        let spoolDirectory = temporaryDirectory()
        let offline = try AuditWriter.started(
            configuration: .init(conninfo: "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", spoolDirectory: spoolDirectory, relayInstance: "nul-reason-2"),
            logger: quietLogger())
        await offline.sendFinishedDurably(refused(2))
        await offline.shutdown()
        #expect(offline.statistics.spooled == 1, "\(offline.statistics)")
        let replaying = try AuditWriter.started(
            configuration: .init(conninfo: database.conninfo, spoolDirectory: spoolDirectory, relayInstance: "nul-reason-2"), logger: quietLogger())
        await replaying.shutdown()
        #expect(replaying.statistics.replayed == 1, "\(replaying.statistics)")
        #expect(replaying.statistics.quarantined == 0)

        let rows = try database.scalar("SELECT string_agg(reason || '|' || (attempt_log->0->>'reason'), ',') FROM apns_audit")
        #expect(rows == "Bad\u{FFFD}Reason|Bad\u{FFFD}Reason,Bad\u{FFFD}Reason|Bad\u{FFFD}Reason")
    }

    @Test("a row Postgres refuses for its data is bisected out and quarantined; every other row is written, live and on replay")
    func quarantine() async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        // payload_bytes is an integer column: 3e9 is out of range (SQLSTATE 22003).
        var events = (0..<1_000).map { EventFactory.event($0, dead: $0 % 100 == 3) }
        events[421].payloadBytesForTest = 3_000_000_000
        var configuration = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "poison")
        configuration.batchSize = 1_000
        configuration.flushInterval = 0.5
        let writer = try AuditWriter.started(configuration: configuration, logger: quietLogger())
        events.forEach(writer.sendFinished)
        await writer.shutdown()
        let statistics = writer.statistics
        #expect(statistics.written == 999, "\(statistics)")
        #expect(statistics.quarantined == 1)
        #expect(statistics.spooled == 0)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "999")
        #expect(try database.scalar("SELECT count(*) FROM apns_dead_tokens") == "10")
        let entries = try AuditQuarantine(directory: configuration.spoolDirectory + "/quarantine").entries()
        #expect(entries.map(\.apnsID) == [events[421].send.apnsID.value])
        #expect(entries.first?.sqlState == "22003")

        // The same poison in the spool (written while Postgres was away): the
        // replay quarantines it and lands the rest, instead of retrying forever.
        let spoolDirectory = temporaryDirectory()
        var offline = AuditWriter.Configuration(conninfo: "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", spoolDirectory: spoolDirectory, relayInstance: "poison-2")
        offline.reconnectMinimumDelay = 0.01
        let first = try AuditWriter.started(configuration: offline, logger: quietLogger())
        var later = (1_000..<1_300).map { EventFactory.event($0) }
        later[5].payloadBytesForTest = 3_000_000_000
        later.forEach(first.sendFinished)
        await first.shutdown()
        #expect(first.statistics.spooled == 300)
        let second = try AuditWriter.started(
            configuration: .init(conninfo: database.conninfo, spoolDirectory: spoolDirectory, relayInstance: "poison-2"), logger: quietLogger())
        await second.shutdown()
        #expect(second.statistics.replayed == 299, "\(second.statistics)")
        #expect(second.statistics.quarantined == 1)
        #expect(second.statistics.spoolBytes == 0)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "1298")
        #expect(try AuditQuarantine(directory: spoolDirectory + "/quarantine").entries().map(\.apnsID) == [later[5].send.apnsID.value])
    }
}

@Suite("Audit writer: the journal")
struct AuditJournalTests {
    /// Journal records as a killed relay leaves them.
    static func journalRecords(intents: [SendEvent], completions: [SendEvent]) -> [AuditSpool.Record] {
        intents.map { event in
            let key = AuditJournalKey(apnsID: event.send.apnsID.value, startedAt: event.startedAt).text
            return AuditSpool.Record(kind: .intent, line: AuditWriter.keyed(key, AuditRecord(intent: event.send, startedAt: event.startedAt, relayInstance: "killed").copyLine()))
        } + completions.map { event in
            let key = AuditJournalKey(apnsID: event.send.apnsID.value, startedAt: event.startedAt).text
            return AuditSpool.Record(kind: .completion, line: AuditWriter.keyed(key, AuditRecord(event: event, relayInstance: "killed").copyLine()))
        }
    }

    @Test("a killed relay's journal: answered sends land once, started-but-unanswered ones as outcome unknown, recovery twice adds nothing")
    func recovery() async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        let events = (0..<300).map { EventFactory.event($0) }
        // 0..<200 started; 0..<150 of them answered; 250..<300 answered without an intent (refusals).
        let records = Self.journalRecords(intents: Array(events[0..<200]), completions: Array(events[0..<150]) + Array(events[250..<300]))
        let directory = temporaryDirectory()
        // The copies: the same journal again later, as if the first recovery's
        // spool append succeeded and the relay died before deleting the journal.
        let (journal, copies) = try AuditSpool.leaveJournal(records, splitAt: 120, in: directory)

        let first = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "next"), logger: quietLogger())
        await first.shutdown()
        #expect(first.statistics.recoveredCompleted == 200)
        #expect(first.statistics.recoveredUnknown == 50)
        #expect(journal.segments().isEmpty)
        for (url, data) in copies { try data.write(to: url) }
        let second = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "next"), logger: quietLogger())
        await second.shutdown()

        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "250")
        #expect(try database.scalar("SELECT count(DISTINCT apns_id) FROM apns_audit") == "250")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit WHERE outcome = 'unknown'") == "50")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit WHERE outcome = 'unknown' AND apns_id = '\(events[170].send.apnsID.value)' AND attempts = 1 AND NOT retried AND error_type = 'relay_stopped'") == "1")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit WHERE outcome = 'success' AND apns_id = '\(events[10].send.apnsID.value)'") == "1")
    }

    @Test("a send whose completion the journal refused (a full disk) and that landed anyway, in Postgres or from the spool, before the relay was killed: recovery adds no unknown row beside it")
    func refusedCompletionLandedElsewhere() async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        let events = (0..<40).map { EventFactory.event($0) }
        // 0..<10: the held completion reached Postgres; 10..<20: it was
        // spooled; 20..<30: never answered; 30..<40: answered and journaled.
        // The killed relay's journal still holds every intent.
        let earlier = try AuditWriter.started(
            configuration: .init(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "killed"), logger: quietLogger())
        events[0..<10].forEach(earlier.sendFinished)
        await earlier.shutdown()
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "10")
        let directory = temporaryDirectory()
        let spool = try AuditSpool(directory: directory)
        try spool.append(events[10..<20].map { AuditSpool.Record(kind: .audit, line: AuditRecord(event: $0, relayInstance: "killed").copyLine()) })
        spool.sealCurrent()
        let journal = try AuditSpool(directory: directory, prefix: "journal-", suffix: ".journal")
        try journal.append(Self.journalRecords(intents: events, completions: Array(events[30..<40])))
        journal.sealCurrent()

        let next = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "next"), logger: quietLogger())
        await next.shutdown()
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "40")
        #expect(try database.scalar("SELECT count(DISTINCT apns_id) FROM apns_audit") == "40")
        let unknown = try database.scalar("SELECT string_agg(apns_id, ',' ORDER BY apns_id) FROM apns_audit WHERE outcome = 'unknown'")
        #expect(unknown == events[20..<30].map(\.send.apnsID.value).sorted().joined(separator: ","))
    }

    @Test("durable sends: intent then completion is one row, the journal is empty after a clean shutdown", arguments: AuditWriter.JournalSync.allCases)
    func intentThenCompletion(journalSync: AuditWriter.JournalSync) async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        let directory = temporaryDirectory()
        var configuration = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "d")
        configuration.journalSync = journalSync
        let writer = try AuditWriter.started(configuration: configuration, logger: quietLogger())
        let events = (0..<2_000).map { EventFactory.event($0, dead: $0 % 400 == 1) }
        await withTaskGroup(of: Void.self) { group in
            for event in events {
                group.addTask {
                    await writer.sendStarting(event.send, startedAt: event.startedAt)
                    await writer.sendFinishedDurably(event)
                }
            }
        }
        if journalSync == .always {
            #expect(writer.statistics.journalCommits < 2_000 * 2, "group commit: many sends share an fdatasync")
        } else {
            #expect(writer.statistics.journalCommits == 2_000 * 2, "one append per record, by the sender")
        }
        // Either way many records share a sync.
        #expect(writer.statistics.journalSyncs < 2_000 * 2, "\(writer.statistics)")
        await writer.shutdown()
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "2000")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit WHERE outcome = 'unknown'") == "0")
        #expect(AuditSpoolListing(directory).journalSegments == 0, "every settled journal segment is deleted")
    }

    @Test("shutdown drops nothing: a send finishing after the writer stopped is journaled and lands from the next start")
    func lateSendAfterShutdown() async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        let directory = temporaryDirectory()
        let writer = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "late"), logger: quietLogger())
        let straggler = EventFactory.event(1)
        let unfinished = EventFactory.event(2)
        await writer.sendStarting(straggler.send, startedAt: straggler.startedAt)
        await writer.sendStarting(unfinished.send, startedAt: unfinished.startedAt)
        await writer.shutdown()
        await writer.sendFinishedDurably(straggler)
        writer.sendFinished(EventFactory.event(3))
        await writer.waitUntilDurable()
        #expect(writer.statistics.dropped == 0)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "0")

        let next = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "late"), logger: quietLogger())
        await next.shutdown()
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "3")
        #expect(try database.scalar("SELECT outcome FROM apns_audit WHERE apns_id = '\(straggler.send.apnsID.value)'") == "success")
        #expect(try database.scalar("SELECT outcome FROM apns_audit WHERE apns_id = '\(unfinished.send.apnsID.value)'") == "unknown")
    }
}

/// Counts the files the writer keeps in its spool directory.
struct AuditSpoolListing {
    let names: [String]
    init(_ directory: String) { names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] }
    var journalSegments: Int { names.filter { $0.hasPrefix("journal-") }.count }
}

extension SendEvent {
    /// Sets the descriptor's payload size (an out-of-range value poisons the row).
    var payloadBytesForTest: Int {
        get { send.payloadBytes }
        set { send.payloadBytes = newValue }
    }
}
