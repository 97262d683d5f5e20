@testable import Audit
import Foundation
import Relay
import Testing

/// The journal's segments are preallocated and appended to through a shared
/// mapping (no `write(2)` per record): every append must be in the file (the
/// page cache, what a killed process leaves) when it returns, and a reader
/// must take the preallocated zero tail for the segment's clean end.
@Suite("Audit journal: mapped segments")
struct AuditJournalMappingTests {
    static func record(_ index: Int, bytes: Int = 40) -> AuditSpool.Record {
        AuditSpool.Record(kind: .deadToken, line: Array("record \(index) ".utf8) + Array(repeating: UInt8(ascii: "x"), count: bytes))
    }

    static func encoded(_ records: [AuditSpool.Record]) -> [UInt8] {
        var bytes: [UInt8] = []
        for record in records { AuditSpool.encode(record, into: &bytes) }
        return bytes
    }

    /// What another descriptor reads, as the next start would after a kill.
    static func readBack(_ directory: String) throws -> (records: [AuditSpool.Record], torn: Int) {
        let reader = try AuditSpool(directory: directory, prefix: "journal-", suffix: ".journal")
        let contents = try reader.segments().map { try reader.read($0) }
        return (contents.flatMap(\.records), contents.reduce(0) { $0 + $1.tornBytes })
    }

    @Test("each unsynced append is in the file once it returns; the preallocated zero tail is no torn record, a partial record after the last whole one is")
    func appendsReadBack() throws {
        let directory = temporaryDirectory()
        let journal = try AuditSpool(directory: directory, segmentLimit: 64 << 10, prefix: "journal-", suffix: ".journal", mapped: true)
        let records = (0..<3).map { Self.record($0) }
        let segment = try journal.append(encoded: Self.encoded([records[0]]), sync: false)
        let url = try #require(journal.segments().first)
        #expect(journal.number(of: url) == segment)
        #expect(try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int == 64 << 10, "the segment is preallocated")
        #expect(try Self.readBack(directory).records == [records[0]])
        #expect(try Self.readBack(directory).torn == 0, "zeros after the last record are its clean end")

        try journal.append(encoded: Self.encoded(Array(records[1...])), sync: false)
        #expect(try Self.readBack(directory).records == records)
        #expect(try Self.readBack(directory).torn == 0)

        // A copy cut short by a kill: part of one more record after the last.
        let size = Self.encoded(records).count
        let partial = Array(Self.encoded([Self.record(3)]).prefix(20))
        let handle = try FileHandle(forWritingTo: url)
        try handle.seek(toOffset: UInt64(size))
        try handle.write(contentsOf: Data(partial))
        try handle.close()
        let torn = try Self.readBack(directory)
        #expect(torn.records == records)
        #expect(torn.torn == partial.count)
        journal.sealCurrent()
    }

    @Test("a record larger than the segment limit gets a mapped segment of its own; records before and after it stay in order")
    func oversizedRecord() throws {
        let directory = temporaryDirectory()
        let journal = try AuditSpool(directory: directory, segmentLimit: 256, prefix: "journal-", suffix: ".journal", mapped: true)
        let records = [Self.record(0), Self.record(1, bytes: 2_000), Self.record(2), Self.record(3, bytes: 300)]
        for record in records { try journal.append(encoded: Self.encoded([record]), sync: false) }
        let read = try Self.readBack(directory)
        #expect(read.records == records)
        #expect(read.torn == 0)
        let work = journal.takeSyncWork()
        for file in work.retired {
            try file.syncData()
            file.close()
        }
        try work.current?.syncData()
        journal.sealCurrent()
    }

    @Test("the journal a killed relay leaves (copied while the writer runs): answered sends recovered with their rows, the others as unknown, nothing torn", arguments: AuditWriter.JournalSync.allCases)
    func killedWritersJournalRecovered(journalSync: AuditWriter.JournalSync) async throws {
        let directory = temporaryDirectory()
        let writer = try AuditJournalSyncTests.writer(journalSync, directory: directory)
        let events = (0..<10).map { EventFactory.event($0) }
        for event in events { await writer.sendStarting(event.send, startedAt: event.startedAt) }
        for event in events[0..<6] { await writer.sendFinishedDurably(event) }
        // What the page cache holds now is what a SIGKILL would leave.
        let copy = temporaryDirectory()
        for url in try AuditSpool(directory: directory, prefix: "journal-", suffix: ".journal").segments() {
            try FileManager.default.copyItem(atPath: url.path, toPath: copy + "/" + url.lastPathComponent)
        }
        let read = try Self.readBack(copy)
        #expect(read.records.filter { $0.kind == .intent }.count == 10)
        #expect(read.records.filter { $0.kind == .completion }.count == 6)
        #expect(read.torn == 0)
        await writer.shutdown()

        let next = try AuditJournalSyncTests.writer(journalSync, directory: copy)
        await next.shutdown()
        #expect(next.statistics.recoveredCompleted == 6, "\(next.statistics)")
        #expect(next.statistics.recoveredUnknown == 4, "\(next.statistics)")
        let spool = try AuditSpool(directory: copy)
        let rows = try spool.segments().flatMap { try spool.read($0).records }
        #expect(rows.filter { $0.kind == .audit }.count == 10, "one row per started send")
        #expect(AuditSpoolListing(copy).journalSegments == 0)
    }
}
