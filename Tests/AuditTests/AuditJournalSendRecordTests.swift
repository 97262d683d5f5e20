@testable import Audit
import Foundation
import Relay
import Testing

/// Recovery of the journal's value records (``JournalSendCodec``), written
/// as this build's sending path writes them, in a journal that also holds an
/// older build's line records: every answered send lands once with the row id
/// its record holds, every unanswered one as `unknown`, and a record this
/// build cannot read keeps the journal on disk instead of losing its rows.
@Suite("Audit writer: the journal's value records")
struct AuditJournalSendRecordTests {
    static func key(_ event: SendEvent) -> String {
        AuditJournalKey(apnsID: event.send.apnsID.value, startedAt: event.startedAt).text
    }

    static func intent(_ event: SendEvent, attempts: Int = 1) -> AuditSpool.Record {
        var line = Array("\(key(event))\t".utf8)
        JournalSendCodec.appendIntent(event.send, startedAt: event.startedAt, attempts: attempts, relayInstance: "killed", to: &line)
        return AuditSpool.Record(kind: .sendIntent, line: line)
    }

    static func completion(_ event: SendEvent, id: AuditRowID.Words) -> AuditSpool.Record {
        var line = Array("\(key(event))\t".utf8)
        JournalSendCodec.appendCompletion(event, id: id, relayInstance: "killed", to: &line)
        return AuditSpool.Record(kind: .sendCompletion, line: line)
    }

    static func idText(_ id: AuditRowID.Words) -> String {
        var text: [UInt8] = []
        id.append(to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    @Test("answered sends land once with their records' row ids, unanswered ones as unknown (a retry's attempts kept), beside an older build's line records; recovered twice, nothing more")
    func recoveredWithIDs() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let events = (0..<60).map { EventFactory.event($0) }
        let ids = events.map { _ in AuditRowID.nextWords() }
        // 0..<40 started, 0..<25 of them answered; 40..<50 answered without an
        // intent (refused before any attempt); 50..<60 as an older build wrote them.
        var records = events[0..<40].enumerated().map { Self.intent($1, attempts: $0 == 30 ? 3 : 1) }
        records += events[0..<25].indices.map { Self.completion(events[$0], id: ids[$0]) }
        records += events[40..<50].indices.map { Self.completion(events[$0], id: ids[$0]) }
        records += AuditJournalTests.journalRecords(intents: Array(events[50..<60]), completions: Array(events[50..<55]))
        let directory = temporaryDirectory()
        let copies = try AuditSpool.leaveJournal(records, splitAt: 33, in: directory).copies

        let first = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "next"), logger: quietLogger())
        await first.shutdown()
        #expect(first.statistics.recoveredCompleted == 25 + 10 + 5, "\(first.statistics)")
        #expect(first.statistics.recoveredUnknown == 15 + 5, "\(first.statistics)")
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "60")
        #expect(try database.scalar("SELECT count(DISTINCT apns_id) FROM apns_audit") == "60")
        // Each answered send's row has the id its record holds, and its values.
        let answered = try database.scalar("""
            SELECT string_agg(apns_id || '=' || id::text, ',' ORDER BY apns_id) FROM apns_audit WHERE outcome <> 'unknown'
            """)?.split(separator: ",").map(String.init) ?? []
        for index in Array(0..<25) + Array(40..<50) {
            #expect(answered.contains("\(events[index].send.apnsID.value)=\(Self.idText(ids[index]))"), "send \(index)")
        }
        let sample = events[7]
        let row = try database.scalar("SELECT outcome || ' ' || status || ' ' || attempts || ' ' || app || ' ' || coalesce(topic, '-') FROM apns_audit WHERE apns_id = '\(sample.send.apnsID.value)'")
        #expect(row == "\(sample.outcome.rawValue) \(sample.status.map(String.init) ?? "") \(sample.attempts) \(sample.send.app) \(sample.send.topic ?? "-")")
        let unknown = try database.scalar("SELECT string_agg(apns_id, ',' ORDER BY apns_id) FROM apns_audit WHERE outcome = 'unknown'")
        #expect(unknown == (events[25..<40] + events[55..<60]).map(\.send.apnsID.value).sorted().joined(separator: ","))
        #expect(try database.scalar("SELECT attempts FROM apns_audit WHERE apns_id = '\(events[30].send.apnsID.value)'") == "3")

        // The same journal again, as if the relay died before deleting it: nothing more lands.
        for (url, data) in copies { try data.write(to: url) }
        let second = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "next"), logger: quietLogger())
        await second.shutdown()
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "60")
    }

    @Test("a record of a codec version this build does not read keeps the whole journal on disk; the relay's own sends still land")
    func newerVersionKept() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let events = (0..<4).map { EventFactory.event($0) }
        var newer = Self.intent(events[1])
        let versionAt = newer.line.firstIndex(of: 0x09)! + 1
        newer.line[versionAt] = JournalSendCodec.version + 1
        let directory = temporaryDirectory()
        let journal = try AuditSpool(directory: directory, prefix: "journal-", suffix: ".journal")
        try journal.append([Self.intent(events[0]), newer, Self.completion(events[2], id: AuditRowID.nextWords())])
        journal.sealCurrent()
        let left = journal.segments()

        let writer = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "next"), logger: quietLogger())
        await writer.sendStarting(events[3].send, startedAt: events[3].startedAt)
        await writer.sendFinishedDurably(events[3])
        await writer.shutdown()
        #expect(try database.scalar("SELECT string_agg(apns_id, ',') FROM apns_audit") == events[3].send.apnsID.value)
        #expect(writer.statistics.recoveredCompleted == 0 && writer.statistics.recoveredUnknown == 0)
        // Every record of the journal it could not read is still there, for a build that can.
        for url in left { #expect(FileManager.default.fileExists(atPath: url.path)) }
        let kept = try left.flatMap { try journal.read($0).records }
        #expect(kept.map(\.kind) == [.sendIntent, .sendIntent, .sendCompletion])
    }
}
