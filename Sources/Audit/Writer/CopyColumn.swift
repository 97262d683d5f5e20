/// One column of an audit table as the writer sees it: its SQL name, the row
/// format that first carried it, and how a record's value goes into a COPY line.
///
/// The columns of ``AuditRowLayout/standard`` are the one description of the
/// `apns_audit` row: the COPY column list, the line writer and the spool's
/// reading of old lines all iterate it, so no two lists have to agree by
/// position. ``DeadTokenRecord/layout`` does the same for `apns_dead_tokens`.
struct CopyColumn<Record>: Sendable {
    /// The column's name in `apns_audit`.
    let name: String
    /// The first row format whose lines hold this column. Lines of an older
    /// format (spool or journal records written before the column existed)
    /// are copied without it, so Postgres gives them the column's default,
    /// as the migration that added it gave the rows already in the table.
    let since: AuditRowFormat
    /// Appends the record's value as one field (the writer adds the separator).
    let write: @Sendable (Record, inout CopyLineWriter) -> Void
    /// Audit columns: what an intent's `unknown` row holds here, so the
    /// journal writes that row straight from the send (see
    /// ``AuditRowLayout/appendIntentLine(_:startedAt:key:relayInstance:to:)``).
    let intent: AuditIntentValue?
    /// Audit columns: what a finished send's row holds here, so the journal
    /// writes that row straight from the ``SendEvent`` (see
    /// ``AuditRowLayout/appendCompletionLine(_:id:relayInstance:to:)``).
    let completion: AuditCompletionValue?

    init(
        _ name: String, since: AuditRowFormat = .v1, intent: AuditIntentValue? = nil,
        completion: AuditCompletionValue? = nil,
        write: @escaping @Sendable (Record, inout CopyLineWriter) -> Void
    ) {
        self.name = name
        self.since = since
        self.intent = intent
        self.completion = completion
        self.write = write
    }
}

/// A column of `apns_audit`.
typealias AuditColumn = CopyColumn<AuditRecord>

/// The version of the row layout of the COPY lines a spool or journal record
/// holds: which columns, in which order. Format 1 is the layout of every
/// record written before records carried a version (their lines are read as
/// format 1). A new column raises the layout's format (see `since`).
struct AuditRowFormat: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    let rawValue: UInt8

    init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The 29 columns of migration 0001, in their COPY order.
    static let v1 = AuditRowFormat(rawValue: 1)
    /// v1 and `idempotency_key_hash` (migration 0005).
    static let v2 = AuditRowFormat(rawValue: 2)
    /// v2 and `apns_timestamp` (migration 0012).
    static let v3 = AuditRowFormat(rawValue: 3)
    /// What this build writes.
    static var current: AuditRowFormat { AuditRowLayout.standard.format }

    static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    var description: String { String(rawValue) }
}
