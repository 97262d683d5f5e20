extension AuditRowLayout {
    /// `apns_audit` as the writer fills it, in COPY order.
    ///
    /// To add a column: a migration in `sql/migrations` that adds it (with the
    /// default older rows should get), a field on ``AuditRecord``, and one row
    /// here with `since:` one format above the newest so far. Lines already in
    /// the spool or a journal keep their format and are copied without it.
    ///
    /// `intent:` is what the column holds in an intent's `unknown` row
    /// (``AuditRecord/init(intent:startedAt:relayInstance:)``), which
    /// recovery writes from the send without building that record;
    /// `completion:` is what it holds in a finished send's row
    /// (``AuditRecord/init(event:relayInstance:)``), which the writer thread
    /// writes from the ``SendEvent`` the same way.
    static let standard = AuditRowLayout(columns: [
        AuditColumn("id", intent: .derivedID, completion: .randomID) { $1.text($0.id) },
        AuditColumn("recorded_at", intent: .startedAt, completion: .finishedAt) { $1.timestamp($0.recordedAtNanoseconds) },
        AuditColumn("started_at", intent: .startedAt, completion: .startedAt) { $1.timestamp($0.startedAtNanoseconds) },
        AuditColumn("finished_at", intent: .startedAt, completion: .finishedAt) { $1.timestamp($0.finishedAtNanoseconds) },
        AuditColumn("apns_id", intent: .send(.apnsID), completion: .send(.apnsID)) { $1.text($0.apnsID) },
        AuditColumn("apns_unique_id", intent: .fixed, completion: .apnsUniqueID) { $1.text($0.apnsUniqueID) },
        AuditColumn("trace_id", intent: .send(.traceID), completion: .send(.traceID)) { $1.text($0.traceID) },
        AuditColumn("app", intent: .send(.app), completion: .send(.app)) { $1.text($0.app) },
        AuditColumn("environment", intent: .send(.environment), completion: .send(.environment)) { $1.text($0.environment) },
        AuditColumn("operation", intent: .send(.operation), completion: .send(.operation)) { $1.text($0.operation) },
        AuditColumn("push_type", intent: .send(.pushType), completion: .send(.pushType)) { $1.text($0.pushType) },
        AuditColumn("priority", intent: .send(.priority), completion: .send(.priority)) { $1.integer($0.priority) },
        AuditColumn("topic", intent: .send(.topic), completion: .send(.topic)) { $1.text($0.topic) },
        AuditColumn("token_fingerprint", intent: .send(.tokenFingerprint), completion: .send(.tokenFingerprint)) { $1.text($0.tokenFingerprint) },
        AuditColumn("channel_id", intent: .send(.channelID), completion: .send(.channelID)) { $1.text($0.channelID) },
        AuditColumn("snapshot_id", intent: .send(.snapshotID), completion: .send(.snapshotID)) { $1.text($0.snapshotID) },
        AuditColumn("surface_id", intent: .send(.surfaceID), completion: .send(.surfaceID)) { $1.text($0.surfaceID) },
        AuditColumn("outcome", intent: .fixed, completion: .outcome) { $1.text($0.outcome) },
        AuditColumn("status", intent: .fixed, completion: .status) { $1.integer($0.status) },
        AuditColumn("reason", intent: .fixed, completion: .reason) { $1.text($0.reason) },
        AuditColumn("error_type", intent: .fixed, completion: .errorType) { $1.text($0.errorType) },
        AuditColumn("trap_ids", intent: .fixed, completion: .trapIDs) { $1.textArray($0.trapIDs) },
        AuditColumn("attempts", intent: .fixed, completion: .attempts) { $1.integer($0.attempts) },
        AuditColumn("retried", intent: .fixed, completion: .retried) { $1.boolean($0.retried) },
        AuditColumn("latency_ms", intent: .fixed, completion: .latencyMilliseconds) { $1.double($0.latencyMilliseconds) },
        AuditColumn("attempt_log", intent: .fixed, completion: .attemptLog) { $1.text($0.attemptLog) },
        AuditColumn("payload_bytes", intent: .send(.payloadBytes), completion: .send(.payloadBytes)) { $1.integer($0.payloadBytes) },
        AuditColumn("caller", intent: .send(.caller), completion: .send(.caller)) { $1.text($0.caller) },
        AuditColumn("relay_instance", intent: .relayInstance, completion: .relayInstance) { $1.text($0.relayInstance) },
        AuditColumn("idempotency_key_hash", since: .v2, intent: .send(.idempotencyKeyHash), completion: .send(.idempotencyKeyHash)) { $1.text($0.idempotencyKeyHash) },
        AuditColumn("apns_timestamp", since: .v3, intent: .fixed, completion: .unregisteredAt) {
            $1.timestamp($0.unregisteredAtMilliseconds.map(AuditRecord.nanoseconds(milliseconds:)))
        },
    ])
}
