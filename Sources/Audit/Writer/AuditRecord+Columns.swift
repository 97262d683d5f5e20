extension AuditRowLayout {
    /// `apns_audit` as the writer fills it, in COPY order.
    ///
    /// To add a column: a migration in `sql/migrations` that adds it (with the
    /// default older rows should get), a field on ``AuditRecord``, and one row
    /// here with `since:` one format above the newest so far. Lines already in
    /// the spool or a journal keep their format and are copied without it.
    static let standard = AuditRowLayout(columns: [
        AuditColumn("id") { $1.text($0.id) },
        AuditColumn("recorded_at") { $1.timestamp($0.recordedAtNanoseconds) },
        AuditColumn("started_at") { $1.timestamp($0.startedAtNanoseconds) },
        AuditColumn("finished_at") { $1.timestamp($0.finishedAtNanoseconds) },
        AuditColumn("apns_id") { $1.text($0.apnsID) },
        AuditColumn("apns_unique_id") { $1.text($0.apnsUniqueID) },
        AuditColumn("trace_id") { $1.text($0.traceID) },
        AuditColumn("app") { $1.text($0.app) },
        AuditColumn("environment") { $1.text($0.environment) },
        AuditColumn("operation") { $1.text($0.operation) },
        AuditColumn("push_type") { $1.text($0.pushType) },
        AuditColumn("priority") { $1.integer($0.priority) },
        AuditColumn("topic") { $1.text($0.topic) },
        AuditColumn("token_fingerprint") { $1.text($0.tokenFingerprint) },
        AuditColumn("channel_id") { $1.text($0.channelID) },
        AuditColumn("snapshot_id") { $1.text($0.snapshotID) },
        AuditColumn("surface_id") { $1.text($0.surfaceID) },
        AuditColumn("outcome") { $1.text($0.outcome) },
        AuditColumn("status") { $1.integer($0.status) },
        AuditColumn("reason") { $1.text($0.reason) },
        AuditColumn("error_type") { $1.text($0.errorType) },
        AuditColumn("trap_ids") { $1.textArray($0.trapIDs) },
        AuditColumn("attempts") { $1.integer($0.attempts) },
        AuditColumn("retried") { $1.boolean($0.retried) },
        AuditColumn("latency_ms") { $1.double($0.latencyMilliseconds) },
        AuditColumn("attempt_log") { $1.text($0.attemptLog) },
        AuditColumn("payload_bytes") { $1.integer($0.payloadBytes) },
        AuditColumn("caller") { $1.text($0.caller) },
        AuditColumn("relay_instance") { $1.text($0.relayInstance) },
        AuditColumn("idempotency_key_hash", since: .v2) { $1.text($0.idempotencyKeyHash) },
    ])
}
