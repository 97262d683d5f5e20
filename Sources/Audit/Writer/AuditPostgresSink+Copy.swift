import Foundation

/// The statements of a write: COPY, the replay's move, the dead-token upsert.
extension AuditPostgresSink {
    /// One transaction: the audit rows by COPY (straight into the table, or,
    /// for replay, through a temporary table so rows already there are
    /// skipped), then the dead-token upserts.
    ///
    /// Audit rows are copied with the columns of their format: a row spooled
    /// before a migration added a column gets that column's default.
    func insert(_ rows: ArraySlice<Row>, replay: Bool, on connection: PostgresConnection) throws {
        let layout = configuration.rowLayout
        // Consecutive rows of one format share a COPY (live batches are all one).
        var audit: [(format: AuditRowFormat, lines: [UInt8])] = []
        var dead: [[UInt8]] = []
        for row in rows {
            if row.kind == .deadToken {
                dead.append(row.line)
                continue
            }
            if audit.last?.format != row.format {
                audit.append((row.format, []))
                audit[audit.count - 1].lines.reserveCapacity(rows.count * 450)
            }
            audit[audit.count - 1].lines.append(contentsOf: row.line)
        }
        // A lone COPY is atomic by itself; a transaction is needed when
        // dead-token upserts ride along, rows go through the replay table,
        // or rows of two formats need two COPYs.
        let transaction = replay || !dead.isEmpty || audit.count > 1
        if transaction { try connection.execute("BEGIN") }
        if replay, !audit.isEmpty {
            try connection.execute(
                "CREATE TEMP TABLE IF NOT EXISTS apns_audit_replay (LIKE apns_audit INCLUDING DEFAULTS) ON COMMIT DELETE ROWS")
        }
        for group in audit {
            guard let columns = layout.columnList(in: group.format) else {
                throw AuditFormatError(format: group.format, newest: layout.format)
            }
            try connection.copyIn("COPY \(replay ? "apns_audit_replay" : "apns_audit") (\(columns)) FROM STDIN", data: group.lines)
        }
        if replay, !audit.isEmpty, let columns = layout.columnList(in: layout.format) {
            // Every column, so an older row's defaults (filled in by the temporary table) land too.
            try connection.execute(Self.replayInsert(columns: columns))
        }
        if !dead.isEmpty { try upsertDeadTokens(dead, on: connection) }
        if transaction { try connection.execute("COMMIT") }
    }

    /// The replay's move from the temporary table: every row once (the
    /// table's key), and no `unknown` row from a killed relay's journal for
    /// a send whose own row exists, already written or in the same replay.
    ///
    /// Why both can exist: a completion the journal refused (its disk full)
    /// is held in memory and written to Postgres or the spool while its
    /// intent stays in the journal until that segment is settled. A kill
    /// between the two leaves the intent to recovery, which cannot know the
    /// send's row landed elsewhere, and its `unknown` row has an id of its
    /// own. The send is one apns-id started at one instant (the journal's
    /// key), so the row with the same `apns_id` and `started_at` and another
    /// outcome is that send's. Only `unknown` rows are checked, and only
    /// here, off the live COPY path.
    static func replayInsert(columns: String) -> String {
        """
        INSERT INTO apns_audit (\(columns)) SELECT \(columns) FROM apns_audit_replay r
        WHERE r.outcome <> '\(AuditRecord.unknownOutcome)'
           OR (NOT EXISTS (SELECT 1 FROM apns_audit a WHERE a.apns_id = r.apns_id AND a.started_at = r.started_at AND a.outcome <> '\(AuditRecord.unknownOutcome)')
               AND NOT EXISTS (SELECT 1 FROM apns_audit_replay o WHERE o.apns_id = r.apns_id AND o.started_at = r.started_at AND o.outcome <> '\(AuditRecord.unknownOutcome)'))
        ON CONFLICT DO NOTHING
        """
    }

    func upsertDeadTokens(_ lines: [[UInt8]], on connection: PostgresConnection) throws {
        try connection.execute(
            "CREATE TEMP TABLE IF NOT EXISTS apns_dead_tokens_incoming (LIKE apns_dead_tokens) ON COMMIT DELETE ROWS")
        let columns = DeadTokenRecord.columns.joined(separator: ", ")
        try connection.copyIn("COPY apns_dead_tokens_incoming (\(columns)) FROM STDIN", data: lines.flatMap { $0 })
        try connection.execute("""
            INSERT INTO apns_dead_tokens AS d (\(columns))
            SELECT DISTINCT ON (app, environment, token) \(columns)
            FROM apns_dead_tokens_incoming ORDER BY app, environment, token, last_seen DESC
            ON CONFLICT (app, environment, token) DO UPDATE SET
                reason = excluded.reason,
                apns_timestamp = coalesce(excluded.apns_timestamp, d.apns_timestamp),
                first_seen = least(d.first_seen, excluded.first_seen),
                last_seen = greatest(d.last_seen, excluded.last_seen)
            """)
    }
}

/// A spooled row's format is newer than this build's layout.
struct AuditFormatError: Error, CustomStringConvertible {
    var format: AuditRowFormat
    var newest: AuditRowFormat
    var description: String { "audit row format \(format) is newer than this relay's (\(newest))" }
}
