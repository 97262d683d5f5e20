@testable import Audit

extension AuditSpool {
    /// The journal's records in `directory`, oldest first, as a reader on
    /// another descriptor sees them (what a killed relay leaves).
    static func journalRecords(in directory: String) throws -> [AuditSpool.Record] {
        let journal = try AuditSpool(directory: directory, prefix: "journal-", suffix: ".journal")
        return try journal.segments().flatMap { try journal.read($0).records }
    }
}

extension AuditSpool.Record {
    /// The journal key a record starts with (the text before its first tab).
    var journalKeyText: String { String(decoding: line.prefix { $0 != 0x09 }, as: UTF8.self) }
}
