/// The ordered columns of an audit row and what follows from them: the COPY
/// column list of each row format, and the row's COPY line.
///
/// A class, immutable: the journal takes the writer's layout for every
/// record, and a struct of eight arrays and dictionaries was copied (each
/// retained and released) for every intent, ~400 instructions a send.
final class AuditRowLayout: Sendable {
    /// Every column, in COPY order (the order of the fields in a line).
    let columns: [AuditColumn]
    /// The format lines are written in: the newest `since` of any column.
    let format: AuditRowFormat
    /// `id, recorded_at, …` for each format up to `format`, by raw value.
    private let columnLists: [UInt8: String]
    /// The column names of each format, by raw value.
    private let columnNames: [UInt8: [String]]
    /// How an intent's row fills each column, when every column says
    /// (``CopyColumn/intent``); nil: built through ``AuditRecord`` instead.
    let intentPlan: [AuditIntentStep]?
    /// The fixed fields of an intent's row, runs of them as COPY text
    /// (``AuditIntentStep/fixed(_:)`` ranges).
    let intentFixedFields: [UInt8]
    /// What each column holds in a finished send's row, when every column
    /// says (``CopyColumn/completion``); nil: built through ``AuditRecord`` instead.
    let completionPlan: [AuditCompletionValue]?

    init(columns: [AuditColumn]) {
        precondition(Set(columns.map(\.name)).count == columns.count, "audit column names must be unique")
        precondition(columns.allSatisfy { $0.since >= .v1 }, "audit row formats start at 1")
        self.columns = columns
        let format = columns.map(\.since).max() ?? .v1
        self.format = format
        var lists: [UInt8: String] = [:]
        var names: [UInt8: [String]] = [:]
        for version in AuditRowFormat.v1.rawValue...format.rawValue {
            let held = columns.filter { $0.since.rawValue <= version }.map(\.name)
            names[version] = held
            lists[version] = held.joined(separator: ", ")
        }
        columnLists = lists
        columnNames = names
        let intent = Self.intentPlan(columns)
        let completion = Self.completionPlan(columns)
        intentPlan = intent?.steps
        intentFixedFields = intent?.fixed ?? []
        completionPlan = completion
    }

    /// The column names of lines in `format` (nil for a format newer than this build knows).
    func names(in format: AuditRowFormat) -> [String]? { columnNames[format.rawValue] }

    /// `names(in:)` joined for a COPY or INSERT column list.
    func columnList(in format: AuditRowFormat) -> String? { columnLists[format.rawValue] }

    /// Whether this build can write lines of `format` to Postgres.
    func knows(_ format: AuditRowFormat) -> Bool { columnLists[format.rawValue] != nil }

    /// The text of the field `column` in a line of `format`, as COPY text (escapes kept).
    func field(_ column: String, of line: [UInt8], in format: AuditRowFormat) -> String? {
        names(in: format)?.firstIndex(of: column).flatMap { CopyText.field($0, of: line) }
    }

    /// The record's COPY line, in a buffer of its own.
    func line(_ record: AuditRecord) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(512)
        appendLine(record, to: &line)
        return line
    }

    /// Appends the record's COPY line (in the layout's `format`: every column) to a batch buffer.
    ///
    /// Field by field into the buffer, with no array of strings in between:
    /// the writer thread shares two cores with Postgres, so every microsecond
    /// spent here is one the COPY does not get.
    func appendLine(_ record: AuditRecord, to line: inout [UInt8]) {
        var writer = CopyLineWriter(line: line)
        line = []
        // By index through the buffer: `for column in columns` copies each
        // column (retaining its closure) per row, 10% of this function's time.
        columns.withUnsafeBufferPointer { columns in
            for index in columns.indices { columns[index].write(record, &writer) }
        }
        line = writer.finish()
    }
}
