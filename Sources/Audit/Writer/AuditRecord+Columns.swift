extension AuditRowLayout {
    /// `apns_audit` as the writer fills it, in COPY order.
    ///
    /// To add a column: a migration in `sql/migrations` that adds it (with the
    /// default older rows should get), a field on ``AuditRecord``, and one row
    /// here with `since:` one format above the newest so far. Lines already in
    /// the spool or a journal keep their format and are copied without it.
    ///
    /// `intent:` is what the column holds in an intent's `unknown` row
    /// (``AuditRecord/init(intent:startedAt:relayInstance:)``), which the
    /// journal writes from the send without building that record.
    static let standard = AuditRowLayout(columns: [
        AuditColumn("id", intent: .derivedID) { $1.text($0.id) },
        AuditColumn("recorded_at", intent: .startedAt) { $1.timestamp($0.recordedAtNanoseconds) },
        AuditColumn("started_at", intent: .startedAt) { $1.timestamp($0.startedAtNanoseconds) },
        AuditColumn("finished_at", intent: .startedAt) { $1.timestamp($0.finishedAtNanoseconds) },
        AuditColumn("apns_id", intent: .apnsID) { $1.text($0.apnsID) },
        AuditColumn("apns_unique_id", intent: .fixed) { $1.text($0.apnsUniqueID) },
        AuditColumn("trace_id", intent: .traceID) { $1.text($0.traceID) },
        AuditColumn("app", intent: .app) { $1.text($0.app) },
        AuditColumn("environment", intent: .environment) { $1.text($0.environment) },
        AuditColumn("operation", intent: .operation) { $1.text($0.operation) },
        AuditColumn("push_type", intent: .pushType) { $1.text($0.pushType) },
        AuditColumn("priority", intent: .priority) { $1.integer($0.priority) },
        AuditColumn("topic", intent: .topic) { $1.text($0.topic) },
        AuditColumn("token_fingerprint", intent: .tokenFingerprint) { $1.text($0.tokenFingerprint) },
        AuditColumn("channel_id", intent: .channelID) { $1.text($0.channelID) },
        AuditColumn("snapshot_id", intent: .snapshotID) { $1.text($0.snapshotID) },
        AuditColumn("surface_id", intent: .surfaceID) { $1.text($0.surfaceID) },
        AuditColumn("outcome", intent: .fixed) { $1.text($0.outcome) },
        AuditColumn("status", intent: .fixed) { $1.integer($0.status) },
        AuditColumn("reason", intent: .fixed) { $1.text($0.reason) },
        AuditColumn("error_type", intent: .fixed) { $1.text($0.errorType) },
        AuditColumn("trap_ids", intent: .fixed) { $1.textArray($0.trapIDs) },
        AuditColumn("attempts", intent: .fixed) { $1.integer($0.attempts) },
        AuditColumn("retried", intent: .fixed) { $1.boolean($0.retried) },
        AuditColumn("latency_ms", intent: .fixed) { $1.double($0.latencyMilliseconds) },
        AuditColumn("attempt_log", intent: .fixed) { $1.text($0.attemptLog) },
        AuditColumn("payload_bytes", intent: .payloadBytes) { $1.integer($0.payloadBytes) },
        AuditColumn("caller", intent: .caller) { $1.text($0.caller) },
        AuditColumn("relay_instance", intent: .relayInstance) { $1.text($0.relayInstance) },
        AuditColumn("idempotency_key_hash", since: .v2, intent: .idempotencyKeyHash) { $1.text($0.idempotencyKeyHash) },
    ])
}
