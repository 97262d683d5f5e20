@testable import Audit

extension AuditRowLayout {
    /// Three columns that say nothing about what an intent or a completion
    /// holds, so the writer builds such rows through `AuditRecord`.
    static let withoutPlans = AuditRowLayout(columns: [
        AuditColumn("id") { $1.text($0.id) }, AuditColumn("outcome") { $1.text($0.outcome) },
        AuditColumn("attempts", since: .v2) { $1.integer($0.attempts) },
    ])
}
