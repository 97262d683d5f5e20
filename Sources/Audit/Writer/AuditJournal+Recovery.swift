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
        // The last intent record of each send whose completion is not (yet)
        // read; formatted as its `unknown` row only if none follows.
        var intents: [String: (record: AuditSpool.Record, segment: URL)] = [:]
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
                case .intent, .completion, .sendIntent, .sendCompletion:
                    guard let tab = record.line.firstIndex(of: 0x09) else { continue }
                    let key = String(decoding: record.line[..<tab], as: UTF8.self)
                    if record.kind == .intent || record.kind == .sendIntent {
                        // Its send finished in an earlier record: an intent
                        // read again (from the stage, written out) is no
                        // unfinished send.
                        guard !completedKeys.contains(key) else { continue }
                        // A retry's intent comes after the send's first and
                        // replaces it (same key, more attempts).
                        if intents.updateValue((record, url), forKey: key) == nil { intentOrder.append(key) }
                    } else {
                        guard completedKeys.insert(key).inserted else { continue }
                        intents[key] = nil
                        records.append(try row(of: record, in: url))
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
            records.append(try row(of: intent.record, in: intent.segment))
            unknown += 1
        }
        if !records.isEmpty { try store(records) }
        for url in segments { try FileManager.default.removeItem(at: url) }
        logger.notice(
            "recovered the audit journal of a relay that stopped without flushing it",
            metadata: ["answered_rows": "\(completed)", "unknown_rows": "\(unknown)", "segments": "\(segments.count)"])
        return (completed, unknown)
    }

    /// The audit row a journal record of a send becomes: a completion's
    /// row, or an intent's `unknown` row (its send's completion never came).
    /// Records an older build wrote hold the line itself; this build's hold
    /// values (``JournalSendCodec``), formatted here in `layout`, a
    /// completion keeping the row id its record holds. Nil for a record
    /// that is not of a send. A record this build cannot read throws.
    static func row(of record: AuditSpool.Record, layout: AuditRowLayout) throws(JournalSendCodec.Unreadable) -> AuditSpool.Record? {
        guard let tab = record.line.firstIndex(of: 0x09) else {
            if record.kind == .audit || record.kind == .deadToken { return nil }
            throw JournalSendCodec.Unreadable(what: "a record without its key")
        }
        let payload = record.line[(tab + 1)...]
        var line: [UInt8] = []
        switch record.kind {
        case .intent, .completion:
            return AuditSpool.Record(kind: .audit, format: record.format, line: Array(payload))
        case .sendCompletion:
            let completion = try JournalSendCodec.readCompletion(payload)
            layout.appendCompletionLine(completion.event, id: completion.id, relayInstance: completion.relayInstance, to: &line)
        case .sendIntent:
            let intent = try JournalSendCodec.readIntent(payload)
            if intent.attempts > 1 {
                layout.appendLine(
                    AuditRecord(intent: intent.send, startedAt: intent.startedAt, relayInstance: intent.relayInstance, attempts: intent.attempts),
                    to: &line)
            } else {
                layout.appendIntentLine(intent.send, startedAt: intent.startedAt, key: record.line[..<tab], relayInstance: intent.relayInstance, to: &line)
            }
        case .audit, .deadToken:
            return nil
        }
        return AuditSpool.Record(kind: .audit, format: layout.format, line: line)
    }

    /// ``row(of:layout:)`` in this journal's layout, naming the segment when it throws.
    private func row(of record: AuditSpool.Record, in segment: URL) throws -> AuditSpool.Record {
        let row: AuditSpool.Record?
        do {
            row = try Self.row(of: record, layout: configuration.rowLayout)
        } catch {
            throw RecoveryError(segment: segment.lastPathComponent, problem: error)
        }
        guard let row else { throw RecoveryError(segment: segment.lastPathComponent, problem: .init(what: "not a send's record")) }
        return row
    }

    /// A journal record this build cannot read (a newer build's): recovery
    /// stops, and every segment stays for a build that can.
    struct RecoveryError: Error, CustomStringConvertible {
        var segment: String
        var problem: JournalSendCodec.Unreadable
        var description: String { "\(problem) (segment \(segment))" }
    }
}
