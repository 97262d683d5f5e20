/// What each journal segment still holds: rows not yet in Postgres or the
/// spool, and intents whose completion has not been journaled. A segment
/// is deleted (oldest first) once it holds nothing. Part of
/// ``AuditWriterState``, guarded with it.
struct AuditJournalLedger {
    /// Rows (and open intents) each journal segment holds that are not yet
    /// in Postgres or the spool.
    var outstanding: [Int: Int] = [:]
    /// The segment of each intent whose completion has not been journaled.
    var openIntents: [AuditJournalKey: AuditWriter.OpenIntent] = [:]
    /// The segment the journal last appended to.
    var currentSegment: Int?
    /// `.interval`: appends since the journal thread last took the journal to sync.
    var unsynced = 0
    /// `.interval`: when the first of those was appended (``MonotonicClock``).
    var unsyncedSince: UInt64?

    /// Whether segment `number` holds nothing any more.
    func isSettled(_ number: Int) -> Bool { outstanding[number, default: 0] <= 0 }

    /// A segment a previous run left: held until the writer thread has recovered it.
    mutating func holdLeftover(_ number: Int) { outstanding[number] = 1 }

    /// Forgets a segment: deleted, or recovered into the spool.
    mutating func forget(_ number: Int) { outstanding[number] = nil }

    /// An intent journaled in `segment`. A retry's record supersedes the
    /// send's earlier intent: that one's segment no longer needs to hold
    /// it.
    mutating func enterIntent(_ item: AuditWriter.JournalItem, segment: Int) {
        if let earlier = openIntents.updateValue(AuditWriter.OpenIntent(segment: segment), forKey: item.key) {
            outstanding[earlier.segment, default: 0] -= 1
        }
        outstanding[segment, default: 0] += 1
    }

    /// The completion of send `key`, its `rows` (the audit row, and a
    /// dead-token upsert's) journaled in `segment`. The intent is answered;
    /// its segment may go once this completion's own segment does (deletion
    /// is oldest first). Mostly both are the current segment: its count
    /// then changes once.
    mutating func enterCompletion(of key: AuditJournalKey, rows: Int, segment: Int) {
        let intentSegment = openIntents.removeValue(forKey: key)?.segment
        outstanding[segment, default: 0] += intentSegment == segment ? rows - 1 : rows
        if let intentSegment, intentSegment != segment {
            outstanding[intentSegment, default: 0] -= 1
        }
    }
}
