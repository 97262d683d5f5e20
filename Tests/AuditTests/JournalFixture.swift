import Foundation
@testable import Audit

extension AuditSpool {
    /// The journal's records in `directory`, oldest first, as a reader on
    /// another descriptor sees them (what a killed relay leaves): its
    /// segments', then those still in its stage (``JournalStage``).
    ///
    /// A live writer's journal thread may write the stage out between the two
    /// reads: the stage is read first, so a record it wrote out meanwhile is
    /// in the segments then, and is taken from there once (a record's bytes
    /// are its own: no two records of a journal are equal).
    static func journalRecords(in directory: String) throws -> [AuditSpool.Record] {
        let staged = try JournalStage.records(inDirectory: directory)
        let journal = try AuditSpool(directory: directory, prefix: "journal-", suffix: ".journal")
        let written = try journal.segments().flatMap { try journal.read($0).records }
        return written + staged.filter { !written.contains($0) }
    }

    /// Writes `records` into `directory` as a killed relay's journal, in two
    /// segments (the first ending before record `split`), and returns each
    /// segment's bytes: written back after a recovery, they are the journal
    /// of a relay that died before deleting it.
    static func leaveJournal(_ records: [AuditSpool.Record], splitAt split: Int, in directory: String) throws -> (journal: AuditSpool, copies: [(URL, Data)]) {
        let journal = try AuditSpool(directory: directory, prefix: "journal-", suffix: ".journal")
        try journal.append(Array(records[..<split]))
        journal.sealCurrent()
        try journal.append(Array(records[split...]))
        journal.sealCurrent()
        return (journal, try journal.segments().map { ($0, try Data(contentsOf: $0)) })
    }
}

extension AuditSpool.Record {
    /// The journal key a record starts with (the text before its first tab).
    var journalKeyText: String { String(decoding: line.prefix { $0 != 0x09 }, as: UTF8.self) }
}

extension AuditWriter {
    /// Copies the journal (its segments and its stage) into `directory` as
    /// it stands now, what a relay killed now would leave: under the
    /// writer's lock, which every append, stage write and trim of
    /// `.interval` takes, so no record is caught moving from the stage to a
    /// segment (`.always` writes only while a call waits for it).
    func copyJournal(to directory: String) throws {
        shared.condition.lock()
        defer { shared.condition.unlock() }
        var names = journal.files.segments().map(\.lastPathComponent)
        if FileManager.default.fileExists(atPath: configuration.spoolDirectory + "/" + JournalStage.fileName) { names.append(JournalStage.fileName) }
        for name in names {
            try FileManager.default.copyItem(atPath: configuration.spoolDirectory + "/" + name, toPath: directory + "/" + name)
        }
    }
}
