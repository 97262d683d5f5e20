@testable import Audit

extension AuditRowLayout {
    /// Three columns that say nothing about what an intent or a completion
    /// holds, so the writer builds such rows through `AuditRecord`.
    static let withoutPlans = AuditRowLayout(columns: [
        AuditColumn("id") { $1.text($0.id) }, AuditColumn("outcome") { $1.text($0.outcome) },
        AuditColumn("attempts", since: .v2) { $1.integer($0.attempts) },
    ])

    /// The standard layout as a relay of row format `format` writes it: the
    /// "before" of a migration test, whose database has no later column
    /// (format 2 before 0012 added `apns_timestamp`).
    static func standard(upTo format: AuditRowFormat) -> AuditRowLayout {
        AuditRowLayout(columns: standard.columns.filter { $0.since <= format })
    }
}
