import APNs
import Relay
import RelayBasics

/// What an intent's `unknown` row (``AuditRecord/init(intent:startedAt:relayInstance:)``)
/// holds in one column: a value of the send, or the same in every such row.
enum AuditIntentValue: Sendable {
    /// The row id derived from the journal key (``AuditRecord/derivedID(_:)``).
    case derivedID
    /// The send's start: `recorded_at`, `started_at` and `finished_at` alike.
    case startedAt
    /// A value of the send itself.
    case send(AuditSendField)
    case relayInstance
    /// The same in every intent's row (outcome `unknown`, no status, …):
    /// the field is taken once from a template record, by the column's own writer.
    case fixed
}

/// One column of an intent's row as the layout writes it.
enum AuditIntentStep: Sendable {
    case value(AuditIntentValue)
    /// A run of adjacent ``AuditIntentValue/fixed`` columns, starting at
    /// this one: their fields as COPY text, tabs between them, at this
    /// range of ``AuditRowLayout/intentFixedFields``. Written with one
    /// append, and no array of its own to retain for each.
    case fixed(Range<Int>)
    /// A fixed column the run before it already wrote.
    case written
}

extension AuditRowLayout {
    /// The steps that write an intent's row, or nil when a column does not
    /// say what it holds there (a layout a test describes): such a layout's
    /// intents go through ``AuditRecord`` and ``appendLine(_:to:)``.
    static func intentPlan(_ columns: [AuditColumn]) -> (steps: [AuditIntentStep], fixed: [UInt8])? {
        // Any send gives the same fixed fields: they depend on none of its values.
        let template = AuditRecord(
            intent: SendDescriptor(app: "", environment: .production, operation: .alert, apnsID: APNsID("00000000-0000-4000-8000-000000000000")!),
            startedAt: 0, relayInstance: "")
        var steps: [AuditIntentStep] = []
        var fixed: [UInt8] = []
        // The step that starts the current run of fixed columns, if any.
        var runStep: Int?
        for column in columns {
            switch column.intent {
            case nil:
                return nil
            case .fixed?:
                var writer = CopyLineWriter(line: [])
                column.write(template, &writer)
                if let first = runStep, case .fixed(let range) = steps[first] {
                    fixed.append(0x09)
                    fixed.append(contentsOf: writer.fields)
                    steps[first] = .fixed(range.lowerBound..<fixed.count)
                    steps.append(.written)
                } else {
                    let start = fixed.count
                    fixed.append(contentsOf: writer.fields)
                    runStep = steps.count
                    steps.append(.fixed(start..<fixed.count))
                }
            case let value?:
                runStep = nil
                steps.append(.value(value))
            }
        }
        return (steps, fixed)
    }

    /// Appends the COPY line of the row `send` gets if no completion follows
    /// its intent: the same bytes as ``appendLine(_:to:)`` of
    /// ``AuditRecord/init(intent:startedAt:relayInstance:)``, written from
    /// the send without that record (its twenty-odd fields copied and
    /// released, three timestamps formatted). Recovery writes one for each
    /// intent whose completion never came.
    /// `key` is the journal key's text, which the row's id derives from.
    func appendIntentLine(_ send: SendDescriptor, startedAt: UInt64, key: some Collection<UInt8>, relayInstance: String, to line: inout [UInt8]) {
        guard let intentPlan else {
            return appendLine(AuditRecord(intent: send, startedAt: startedAt, relayInstance: relayInstance), to: &line)
        }
        let derivedID = AuditRecord.derivedIDWords(of: key)
        var writer = CopyLineWriter(line: line)
        line = []
        var started: Range<Int>?
        intentPlan.withUnsafeBufferPointer { steps in
            intentFixedFields.withUnsafeBufferPointer { fixed in
                for step in steps {
                    switch step {
                    case .fixed(let range): writer.escaped(UnsafeBufferPointer(rebasing: fixed[range]))
                    case .written: break
                    case .value(let value):
                        switch value {
                        case .derivedID: writer.unescaped { AuditRecord.appendDerivedID(high: derivedID.high, low: derivedID.low, to: &$0) }
                        // recorded_at, started_at and finished_at: one instant, formatted once.
                        case .startedAt: writer.timestamp(startedAt, sameAs: &started)
                        case .send(let field): field.write(send, to: &writer)
                        case .relayInstance: writer.text(relayInstance)
                        case .fixed: preconditionFailure("a fixed column is planned as its field")
                        }
                    }
                }
            }
        }
        line = writer.finish()
    }
}
