import Foundation
import Logging

extension AuditJournal {
    /// Moves what a previous run left in the journal to the spool: every
    /// completion as its row, every intent without a completion as an
    /// `unknown` row, every dead-token upsert. Idempotent: recovered twice,
    /// the same rows carry the same keys and replay lands them once.
    ///
    /// Runs on the writer thread before its first batch; reads only the
    /// given (leftover) segments and deletes them by path, never touching
    /// the journal's current segment, which the journal thread owns.
    func recover(_ segments: [URL], store: ([AuditSpool.Record]) throws -> Void) throws -> (completed: Int, unknown: Int) {
        guard !segments.isEmpty else { return (0, 0) }
        var intents: [String: (format: AuditRowFormat, line: [UInt8])] = [:]
        var intentOrder: [String] = []
        var records: [AuditSpool.Record] = []
        // A record may be there twice: written from the stage to a segment
        // by a run killed before it emptied the stage (``JournalStage``).
        var completedKeys: Set<String> = []
        var completed = 0
        for url in segments {
            let contents = try files.read(url)
            if contents.tornBytes > 0, !contents.tailIsZeros {
                // Never acknowledged: a crash during its write.
                logger.warning("audit journal segment has a torn tail; skipping it", metadata: ["segment": "\(url.lastPathComponent)", "bytes": "\(contents.tornBytes)"])
            }
            for record in contents.records {
                switch record.kind {
                case .intent, .completion:
                    guard let tab = record.line.firstIndex(of: 0x09) else { continue }
                    let key = String(decoding: record.line[..<tab], as: UTF8.self)
                    let line = Array(record.line[(tab + 1)...])
                    if record.kind == .intent {
                        // Its send finished in an earlier record: an intent
                        // read again (from the stage, written out) is no
                        // unfinished send.
                        guard !completedKeys.contains(key) else { continue }
                        // A retry's intent comes after the send's first and
                        // replaces it (same key, more attempts).
                        if intents.updateValue((record.format, line), forKey: key) == nil { intentOrder.append(key) }
                    } else {
                        guard completedKeys.insert(key).inserted else { continue }
                        intents[key] = nil
                        records.append(AuditSpool.Record(kind: .audit, format: record.format, line: line))
                        completed += 1
                    }
                case .deadToken, .audit:
                    records.append(AuditSpool.Record(kind: record.kind == .audit ? .audit : .deadToken, format: record.format, line: record.line))
                }
            }
        }
        var unknown = 0
        for key in intentOrder {
            guard let intent = intents.removeValue(forKey: key) else { continue }
            records.append(AuditSpool.Record(kind: .audit, format: intent.format, line: intent.line))
            unknown += 1
        }
        if !records.isEmpty { try store(records) }
        for url in segments { try FileManager.default.removeItem(at: url) }
        logger.notice(
            "recovered the audit journal of a relay that stopped without flushing it",
            metadata: ["answered_rows": "\(completed)", "unknown_rows": "\(unknown)", "segments": "\(segments.count)"])
        return (completed, unknown)
    }
}
