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
    /// journal writes from the send without building that record;
    /// `completion:` is what it holds in a finished send's row
    /// (``AuditRecord/init(event:relayInstance:)``), which the journal writes
    /// from the ``SendEvent`` the same way.
    static let standard = AuditRowLayout(columns: [
        AuditColumn("id", intent: .derivedID, completion: .randomID) { $1.text($0.id) },
        AuditColumn("recorded_at", intent: .startedAt, completion: .finishedAt) { $1.timestamp($0.recordedAtNanoseconds) },
        AuditColumn("started_at", intent: .startedAt, completion: .startedAt) { $1.timestamp($0.startedAtNanoseconds) },
        AuditColumn("finished_at", intent: .startedAt, completion: .finishedAt) { $1.timestamp($0.finishedAtNanoseconds) },
        AuditColumn("apns_id", intent: .apnsID, completion: .apnsID) { $1.text($0.apnsID) },
        AuditColumn("apns_unique_id", intent: .fixed, completion: .apnsUniqueID) { $1.text($0.apnsUniqueID) },
        AuditColumn("trace_id", intent: .traceID, completion: .traceID) { $1.text($0.traceID) },
        AuditColumn("app", intent: .app, completion: .app) { $1.text($0.app) },
        AuditColumn("environment", intent: .environment, completion: .environment) { $1.text($0.environment) },
        AuditColumn("operation", intent: .operation, completion: .operation) { $1.text($0.operation) },
        AuditColumn("push_type", intent: .pushType, completion: .pushType) { $1.text($0.pushType) },
        AuditColumn("priority", intent: .priority, completion: .priority) { $1.integer($0.priority) },
        AuditColumn("topic", intent: .topic, completion: .topic) { $1.text($0.topic) },
        AuditColumn("token_fingerprint", intent: .tokenFingerprint, completion: .tokenFingerprint) { $1.text($0.tokenFingerprint) },
        AuditColumn("channel_id", intent: .channelID, completion: .channelID) { $1.text($0.channelID) },
        AuditColumn("snapshot_id", intent: .snapshotID, completion: .snapshotID) { $1.text($0.snapshotID) },
        AuditColumn("surface_id", intent: .surfaceID, completion: .surfaceID) { $1.text($0.surfaceID) },
        AuditColumn("outcome", intent: .fixed, completion: .outcome) { $1.text($0.outcome) },
        AuditColumn("status", intent: .fixed, completion: .status) { $1.integer($0.status) },
        AuditColumn("reason", intent: .fixed, completion: .reason) { $1.text($0.reason) },
        AuditColumn("error_type", intent: .fixed, completion: .errorType) { $1.text($0.errorType) },
        AuditColumn("trap_ids", intent: .fixed, completion: .trapIDs) { $1.textArray($0.trapIDs) },
        AuditColumn("attempts", intent: .fixed, completion: .attempts) { $1.integer($0.attempts) },
        AuditColumn("retried", intent: .fixed, completion: .retried) { $1.boolean($0.retried) },
        AuditColumn("latency_ms", intent: .fixed, completion: .latencyMilliseconds) { $1.double($0.latencyMilliseconds) },
        AuditColumn("attempt_log", intent: .fixed, completion: .attemptLog) { $1.text($0.attemptLog) },
        AuditColumn("payload_bytes", intent: .payloadBytes, completion: .payloadBytes) { $1.integer($0.payloadBytes) },
        AuditColumn("caller", intent: .caller, completion: .caller) { $1.text($0.caller) },
        AuditColumn("relay_instance", intent: .relayInstance, completion: .relayInstance) { $1.text($0.relayInstance) },
        AuditColumn("idempotency_key_hash", since: .v2, intent: .idempotencyKeyHash, completion: .idempotencyKeyHash) { $1.text($0.idempotencyKeyHash) },
    ])
}
