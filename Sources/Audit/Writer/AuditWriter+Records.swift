import Relay

/// What travels between the sending threads, the journal and the writer thread.
extension AuditWriter {
    /// A row on its way to Postgres: its COPY line, and the journal segment
    /// that holds it until it is written or spooled (nil once it is on disk elsewhere).
    struct Row {
        var kind: AuditSpool.Kind
        /// The layout `line` was written in: older than the writer's for rows replayed from the spool.
        var format: AuditRowFormat
        /// Empty while ``pending`` holds the values it is formatted from.
        var line: [UInt8]
        var journalSegment: Int?
        /// Its completion could not be journaled: until it is written or
        /// spooled it is in memory only (its segment, if any, is its
        /// intent's, held so the send is at least recovered as `unknown`),
        /// and the relay takes no new sends.
        var undurable = false
        /// A finished send's row as the sending task left it: its values,
        /// formatted into ``line`` by the writer thread when it takes the
        /// row (``formatted(layout:relayInstance:)``), not on the pool.
        var pending: PendingCompletion?

        /// The row with ``line`` formatted from ``pending`` (the same row when there is none).
        func formatted(layout: AuditRowLayout, relayInstance: String) -> Row {
            guard let pending else { return self }
            var row = self
            var line: [UInt8] = []
            line.reserveCapacity(640)
            layout.appendCompletionLine(pending.event, id: pending.id, relayInstance: relayInstance, to: &line)
            row.line = line
            row.pending = nil
            return row
        }

        /// The row's apns-id, for a log line.
        func apnsID(layout: AuditRowLayout) -> String {
            if let pending { return pending.event.send.apnsID.value }
            return layout.field("apns_id", of: line, in: format) ?? ""
        }
    }

    /// A finished send's values, between its journal record and its line:
    /// a class, so the queue's rows copy one reference, not the event's
    /// twenty-odd strings.
    final class PendingCompletion {
        let event: SendEvent
        /// The row's id, as its journal record holds it: a row recovered
        /// from the journal after being written keeps it, and lands once.
        let id: AuditRowID.Words

        init(event: SendEvent, id: AuditRowID.Words) {
            self.event = event
            self.id = id
        }
    }

    /// An intent in the ledger (``openIntents``).
    struct OpenIntent {
        var segment: Int
    }

    /// What the journal thread is asked to make durable (`.always`).
    /// Encoded on the journal thread, not on the sending task: the
    /// cooperative pool has two threads and they are the scarce resource.
    enum JournalEntry {
        case intent(SendDescriptor, startedAt: UInt64)
        /// The send's intent again, before retry `attempt` leaves: it
        /// supersedes the earlier one (``AuditWriter/sendRetrying(_:startedAt:attempt:)``).
        case retry(SendDescriptor, startedAt: UInt64, attempt: Int)
        case completion(SendEvent)
        /// Nothing to write: resumes its waiter once everything before it is durable.
        case barrier
    }

    /// A journal record as the writer's ledger needs it: the key tying an
    /// intent to its completion, and a completion's row(s) for the queue.
    struct JournalItem {
        var key: AuditJournalKey
        var intent: Bool
        /// A completion's row, formatted by the writer thread.
        var completion: PendingCompletion?
        var dead: [UInt8]?
    }

    /// `key TAB`, the prefix of an intent's or a completion's line.
    static func appendKey(_ key: String, to line: inout [UInt8]) {
        appendKey(key.utf8, to: &line)
    }

    /// `key TAB`, from the key's text (``AuditJournalKey/bytes``).
    static func appendKey(_ key: some Sequence<UInt8>, to line: inout [UInt8]) {
        line.append(contentsOf: key)
        line.append(0x09)
    }

    static func keyed(_ key: String, _ line: [UInt8]) -> [UInt8] {
        var keyed: [UInt8] = []
        keyed.reserveCapacity(key.utf8.count + 1 + line.count)
        appendKey(key, to: &keyed)
        keyed.append(contentsOf: line)
        return keyed
    }
}
