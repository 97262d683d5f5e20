import Foundation
import Logging

extension AuditWriter {
    /// The writer thread: take a batch, replay the spool if Postgres is back,
    /// write or spool the batch, repeat until shutdown has drained the queue.
    func run() {
        while true {
            condition.lock()
            if queue.count - queueHead == 0, !stopping {
                _ = condition.wait(until: Date().addingTimeInterval(configuration.flushInterval))
            }
            let depth = queue.count - queueHead
            let catchingUp = depth > configuration.highWaterMark
            let take = catchingUp ? depth : min(depth, configuration.batchSize)
            let batch = Array(queue[queueHead..<(queueHead + take)])
            queueHead += take
            if queueHead > 4096, queueHead * 2 > queue.count {
                queue.removeFirst(queueHead)
                queueHead = 0
            }
            let exiting = stopping && queue.count - queueHead == 0
            condition.unlock()

            connectIfDue()
            if connection != nil, !spool.segments().isEmpty { replaySpool() }
            if connection != nil { maintainPartitionsIfDue() }
            if !batch.isEmpty {
                // Rows must reach Postgres in order: while older rows wait in
                // the spool, newer ones queue behind them there.
                if let connection, !catchingUp, spool.segments().isEmpty {
                    write(batch, to: connection)
                } else {
                    spoolBatch(batch)
                }
            }
            if exiting { break }
        }
        // Rows spooled while catching up or during a blip are replayed before
        // exit if Postgres answers one more try; otherwise they wait on disk
        // for the next start.
        if !spool.segments().isEmpty {
            if connection == nil { nextConnectAttempt = .distantPast }
            connectIfDue()
            if connection != nil { replaySpool() }
        }
        spool.sealCurrent()
        connection = nil
        condition.lock()
        finished = true
        counters.connected = false
        let waiting = exitContinuations
        exitContinuations = []
        condition.unlock()
        waiting.forEach { $0.resume() }
    }

    private func connectIfDue() {
        guard connection == nil, Date() >= nextConnectAttempt else { return }
        // No database configured: every row stays in the spool until a relay
        // with a database replays it.
        guard !configuration.spoolOnly else { return }
        do {
            let connection = try PostgresConnection(conninfo: configuration.conninfo)
            try connection.execute("SET application_name = 'apns-relay audit writer'")
            self.connection = connection
            reconnectDelay = configuration.reconnectMinimumDelay
            lastMaintenance = .distantPast
            setConnected(true)
            logger.info("audit writer connected to Postgres")
        } catch {
            nextConnectAttempt = Date().addingTimeInterval(reconnectDelay * Double.random(in: 0.8...1.2))
            reconnectDelay = min(reconnectDelay * 2, configuration.reconnectMaximumDelay)
            logger.warning("audit writer cannot reach Postgres; spooling to disk", metadata: ["error": "\(error)"])
        }
    }

    private func dropConnection(after error: any Error) {
        connection = nil
        nextConnectAttempt = Date().addingTimeInterval(reconnectDelay)
        setConnected(false)
        logger.warning("audit write failed; spooling to disk until Postgres answers", metadata: ["error": "\(error)"])
    }

    private func setConnected(_ connected: Bool) {
        condition.lock()
        counters.connected = connected
        condition.unlock()
    }

    private func write(_ batch: [Item], to connection: PostgresConnection) {
        let started = Date()
        let (audit, auditCount, dead) = Self.copyData(batch)
        do {
            // A lone COPY is atomic by itself; a transaction is needed only
            // when dead-token upserts ride along.
            if !dead.isEmpty { try connection.execute("BEGIN") }
            if auditCount > 0 {
                try connection.copyIn("COPY apns_audit (\(AuditRecord.columns.joined(separator: ", "))) FROM STDIN", data: audit)
            }
            if !dead.isEmpty {
                try upsertDeadTokens(dead, on: connection)
                try connection.execute("COMMIT")
            }
            let seconds = Date().timeIntervalSince(started)
            condition.lock()
            counters.written += auditCount
            counters.deadTokensUpserted += dead.count
            counters.lastWriteSeconds = seconds
            counters.writeBatches += 1
            condition.unlock()
        } catch {
            _ = try? connection.execute("ROLLBACK")
            dropConnection(after: error)
            spoolBatch(batch)
        }
    }

    private func upsertDeadTokens(_ lines: [[UInt8]], on connection: PostgresConnection) throws {
        try connection.execute(
            "CREATE TEMP TABLE IF NOT EXISTS apns_dead_tokens_incoming (LIKE apns_dead_tokens) ON COMMIT DELETE ROWS")
        try connection.copyIn(
            "COPY apns_dead_tokens_incoming (\(DeadTokenRecord.columns.joined(separator: ", "))) FROM STDIN",
            data: lines.flatMap { $0 })
        try connection.execute("""
            INSERT INTO apns_dead_tokens AS d (app, environment, token, token_fingerprint, reason, apns_timestamp, first_seen, last_seen)
            SELECT DISTINCT ON (app, environment, token) app, environment, token, token_fingerprint, reason, apns_timestamp, first_seen, last_seen
            FROM apns_dead_tokens_incoming ORDER BY app, environment, token, last_seen DESC
            ON CONFLICT (app, environment, token) DO UPDATE SET
                reason = excluded.reason,
                apns_timestamp = coalesce(excluded.apns_timestamp, d.apns_timestamp),
                first_seen = least(d.first_seen, excluded.first_seen),
                last_seen = greatest(d.last_seen, excluded.last_seen)
            """)
    }

    private func spoolBatch(_ batch: [Item]) {
        let records = batch.map { item -> AuditSpool.Record in
            switch item {
            case .audit(let record): AuditSpool.Record(kind: .audit, line: record.copyLine())
            case .deadToken(let record): AuditSpool.Record(kind: .deadToken, line: record.copyLine())
            }
        }
        do {
            try spool.append(records)
            let audited = batch.filter { if case .audit = $0 { true } else { false } }.count
            let bytes = spool.totalBytes()
            condition.lock()
            counters.spooled += audited
            counters.spoolBytes = bytes
            condition.unlock()
        } catch {
            // The disk failed too: these rows are lost; say so loudly.
            let audited = batch.filter { if case .audit = $0 { true } else { false } }.count
            condition.lock()
            counters.dropped += audited
            condition.unlock()
            logger.critical("audit spool write failed; rows dropped", metadata: ["rows": "\(audited)", "error": "\(error)"])
        }
    }

    /// Replays spool segments oldest first through a temporary table, so a row
    /// already in Postgres (its COPY committed but the answer was lost) is
    /// skipped rather than duplicated.
    private func replaySpool() {
        spool.sealCurrent()
        for segment in spool.segments() {
            guard let connection else { return }
            do {
                let contents = try spool.read(segment)
                if contents.tornBytes > 0 {
                    logger.warning(
                        "audit spool segment has a torn tail; skipping it",
                        metadata: ["segment": "\(segment.lastPathComponent)", "bytes": "\(contents.tornBytes)"])
                    condition.lock()
                    counters.tornRecords += 1
                    condition.unlock()
                }
                let audit = contents.records.filter { $0.kind == .audit }.map(\.line)
                let dead = contents.records.filter { $0.kind == .deadToken }.map(\.line)
                try connection.execute("BEGIN")
                try connection.execute(
                    "CREATE TEMP TABLE IF NOT EXISTS apns_audit_replay (LIKE apns_audit INCLUDING DEFAULTS) ON COMMIT DELETE ROWS")
                if !audit.isEmpty {
                    try connection.copyIn(
                        "COPY apns_audit_replay (\(AuditRecord.columns.joined(separator: ", "))) FROM STDIN", data: audit.flatMap { $0 })
                    try connection.execute(
                        "INSERT INTO apns_audit (\(AuditRecord.columns.joined(separator: ", "))) SELECT \(AuditRecord.columns.joined(separator: ", ")) FROM apns_audit_replay ON CONFLICT DO NOTHING")
                }
                if !dead.isEmpty { try upsertDeadTokens(dead, on: connection) }
                try connection.execute("COMMIT")
                try spool.remove(segment)
                let bytes = spool.totalBytes()
                condition.lock()
                counters.replayed += audit.count
                counters.spoolBytes = bytes
                condition.unlock()
                logger.info("replayed audit spool segment", metadata: ["segment": "\(segment.lastPathComponent)", "rows": "\(audit.count)"])
            } catch {
                _ = try? connection.execute("ROLLBACK")
                dropConnection(after: error)
                return
            }
        }
    }

    /// Keeps daily partitions ready ahead of time and applies retention, hourly.
    private func maintainPartitionsIfDue() {
        guard let connection, Date().timeIntervalSince(lastMaintenance) > 3600 else { return }
        lastMaintenance = Date()
        do {
            try connection.execute(
                "SELECT apns_audit_ensure_partitions(((now() AT TIME ZONE 'UTC')::date - 1), $1::integer)",
                [String(configuration.partitionDaysAhead + 2)])
            if let days = configuration.retentionDays {
                try connection.execute("SELECT apns_audit_drop_partitions($1::integer)", [String(days)])
            }
        } catch {
            logger.error("audit partition maintenance failed (run `apns-relay migrate`?)", metadata: ["error": "\(error)"])
        }
    }

    /// The batch as one COPY buffer of audit rows (and their count) plus dead-token lines.
    static func copyData(_ batch: [Item]) -> (audit: [UInt8], auditCount: Int, dead: [[UInt8]]) {
        var audit: [UInt8] = []
        audit.reserveCapacity(batch.count * 400)
        var count = 0
        var dead: [[UInt8]] = []
        for item in batch {
            switch item {
            case .audit(let record):
                record.appendCopyLine(to: &audit)
                count += 1
            case .deadToken(let record): dead.append(record.copyLine())
            }
        }
        return (audit, count, dead)
    }
}
