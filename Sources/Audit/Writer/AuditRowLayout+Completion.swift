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
    /// and released, its attempt log and id built as strings first), once
    /// per send on the sending thread.
    ///
    /// `id` is the row's id; nil (what the writer passes) takes the next
    /// ``AuditRowID`` straight into the line. A test pins it to compare
    /// with a record's line.
    ///
    /// `intent` is the send's intent's fields (``AuditIntentFields``), taken
    /// from the same send by this layout: its ``copyRuns`` are copied from
    /// them, already COPY text, instead of written from the send again.
    func appendCompletionLine(
        _ event: SendEvent, id: String? = nil, relayInstance: String, intent: AuditIntentFields? = nil, to line: inout [UInt8]
    ) {
        guard let completionPlan else {
            var record = AuditRecord(event: event, relayInstance: relayInstance)
            if let id { record.id = id }
            return appendLine(record, to: &line)
        }
        let send = event.send
        var writer = CopyLineWriter(line: line)
        line = []
        // Fields of another layout (none of the writer's) are not used.
        let intent = intent.flatMap { $0.runs == copyRuns.count && $0.isComplete ? $0 : nil }
        // recorded_at and finished_at: one instant, formatted once.
        var finished: Range<Int>?
        completionPlan.withUnsafeBufferPointer { plan in
            var index = 0
            var run = 0
            while index < plan.count {
                if let intent, run < copyRuns.count, index == copyRuns[run].lowerBound {
                    intent.withRun(run) { writer.escaped($0) }
                    index = copyRuns[run].upperBound
                    run += 1
                    continue
                }
                defer { index += 1 }
                switch plan[index] {
                case .randomID:
                    if let id { writer.text(id) } else { writer.unescaped(writing: { AuditRowID.appendNext(to: &$0) }) }
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
