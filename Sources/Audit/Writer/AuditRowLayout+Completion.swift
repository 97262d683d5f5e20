import APNs
import Relay

/// What a finished send's row (``AuditRecord/init(event:relayInstance:)``)
/// holds in one column: a value of the ``SendEvent``, its send, or the writer.
enum AuditCompletionValue: Sendable {
    /// A fresh row id (``AuditRowID``: ``APNsID/random()``'s form).
    case randomID
    /// The send's finish: `recorded_at` and `finished_at`.
    case finishedAt
    case startedAt
    /// A value of the send itself.
    case send(AuditSendField)
    case apnsUniqueID, outcome, status, reason, errorType, trapIDs, attempts, retried
    /// `latencySeconds * 1000`, as ``AuditRecord`` computes it.
    case latencyMilliseconds
    /// The attempt log's JSON (``AuditRecord/attemptLogJSON(_:)``).
    case attemptLog
    case relayInstance
    /// APNs' `timestamp` of a 410 (``SendEvent/unregisteredAt``), as a timestamp.
    case unregisteredAt
}

extension AuditRowLayout {
    /// What each column holds in a finished send's row, or nil when a column
    /// does not say (a layout a test describes): such a layout's completions
    /// go through ``AuditRecord`` and ``appendLine(_:to:)``.
    static func completionPlan(_ columns: [AuditColumn]) -> [AuditCompletionValue]? {
        var plan: [AuditCompletionValue] = []
        plan.reserveCapacity(columns.count)
        for column in columns {
            guard let value = column.completion else { return nil }
            plan.append(value)
        }
        return plan
    }

    /// Appends the COPY line of a finished send's row: the same bytes as
    /// ``appendLine(_:to:)`` of ``AuditRecord/init(event:relayInstance:)``,
    /// written from the event without that record (its thirty fields copied
    /// and released, its attempt log and id built as strings first), by the
    /// writer thread as it takes the row (``AuditWriter/Row/formatted(layout:relayInstance:)``),
    /// and by recovery.
    ///
    /// `id` is the row's id, as the journal's record holds it; nil takes
    /// the next ``AuditRowID`` straight into the line.
    func appendCompletionLine(_ event: SendEvent, id: AuditRowID.Words? = nil, relayInstance: String, to line: inout [UInt8]) {
        guard let completionPlan else {
            var record = AuditRecord(event: event, relayInstance: relayInstance)
            if let id {
                var text: [UInt8] = []
                id.append(to: &text)
                record.id = String(decoding: text, as: UTF8.self)
            }
            return appendLine(record, to: &line)
        }
        let send = event.send
        var writer = CopyLineWriter(line: line)
        line = []
        // recorded_at and finished_at: one instant, formatted once.
        var finished: Range<Int>?
        completionPlan.withUnsafeBufferPointer { plan in
            for index in plan.indices {
                switch plan[index] {
                case .randomID:
                    let id = id ?? AuditRowID.nextWords()
                    writer.unescaped(writing: { id.append(to: &$0) })
                case .finishedAt: writer.timestamp(event.finishedAt, sameAs: &finished)
                case .startedAt: writer.timestamp(event.startedAt)
                case .send(let field): field.write(send, to: &writer)
                case .apnsUniqueID: writer.text(event.apnsUniqueID)
                case .outcome: writer.text(event.outcome.rawValue)
                case .status: writer.integer(event.status)
                case .reason: writer.text(event.reason)
                case .errorType: writer.text(event.errorType)
                // Most sends hit no trap: an empty array maps to an empty
                // array without allocating, and textArray writes `{}` for it.
                case .trapIDs: writer.textArray(event.trapHits.map(\.rawValue))
                case .attempts: writer.integer(event.attempts)
                case .retried: writer.boolean(event.retried)
                case .latencyMilliseconds: writer.double(event.latencySeconds * 1000)
                case .attemptLog: writer.text(writing: { AuditRecord.appendAttemptLogJSON(event.attemptLog, to: &$0) })
                case .relayInstance: writer.text(relayInstance)
                case .unregisteredAt: writer.timestamp(event.unregisteredAt.map(AuditRecord.nanoseconds(milliseconds:)))
                }
            }
        }
        line = writer.finish()
    }
}
