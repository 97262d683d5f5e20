import APNs
import Foundation
import Logging
import RelayBasics

extension AuditWriter {
    /// The writer thread: take a batch, replay the spool if Postgres is back,
    /// write or spool the batch, repeat until shutdown has drained the queue
    /// and the journal has nothing left to hand over.
    func run() {
        recoverLeftoverJournal()
        while true {
            condition.lock()
            if queue.count - queueHead == 0, !stopping || !journalIsIdle() {
                // Stopping, the writer still waits while the journal hands over its last group.
                condition.wait(until: MonotonicClock.now() + MonotonicClock.nanoseconds(configuration.flushInterval))
            } else {
                // A partial batch waits for more rows until `flushInterval`
                // after the previous take (enqueuers wake the writer at a
                // full batch, and shutdown at once). Taking whatever arrived
                // during the last COPY instead made a steady flow of single
                // sends into COPYs of a few rows, and Postgres' fixed cost
                // per statement and transaction then exceeded its cost per row.
                // Monotonic: a take measured on the wall clock, stepped back
                // since, lay in the future and the rows waited out the step.
                let due = lastTake + MonotonicClock.nanoseconds(configuration.flushInterval)
                while !stopping, queue.count - queueHead < configuration.batchSize, MonotonicClock.now() < due {
                    condition.wait(until: due)
                }
            }
            lastTake = MonotonicClock.now()
            condition.unlock()
            // Read after any wait and before the queue: once the journal is
            // idle, every row it took is already queued.
            let journalIdle = journalIsIdle()
            condition.lock()
            let depth = queue.count - queueHead
            let catchingUp = depth > configuration.highWaterMark
            let take = catchingUp ? depth : min(depth, configuration.batchSize)
            var batch = Array(queue[queueHead..<(queueHead + take)])
            queueHead += take
            if queueHead > 4096, queueHead * 2 > queue.count {
                queue.removeFirst(queueHead)
                queueHead = 0
            }
            let exiting = stopping && journalIdle && queue.count - queueHead == 0
            condition.unlock()

            if !unsettled.isEmpty {
                batch = unsettled + batch
                unsettled = []
            }
            connectIfDue()
            recoverLeftoverJournal()
            // Only this thread adds spool segments, so what it does between
            // here and `updateBehind` is known without listing again, and an
            // empty spool stays empty until it spools (``spoolHoldsReplayableRows(listing:)``).
            var spoolHoldsRows = spoolHoldsReplayableRows()
            if connection != nil, spoolHoldsRows {
                replaySpool()
                spoolHoldsRows = spoolHoldsReplayableRows(listing: true)
            }
            if connection != nil { maintainPartitionsIfDue() }
            if !batch.isEmpty {
                // Rows must reach Postgres in order: while older rows wait in
                // the spool, newer ones queue behind them there.
                if connection != nil, !catchingUp, !spoolHoldsRows {
                    write(batch)
                } else {
                    spoolBatch(batch)
                    spoolHoldsRows = true
                }
            }
            // `write` spools only after dropping the connection, which counts as behind by itself.
            updateBehind(spoolHoldsRows: spoolHoldsRows)
            if exiting, unsettled.isEmpty { break }
            if exiting {
                // The spool refused the last rows. Those the journal holds
                // stay there for the next start; those it refused (in
                // memory only) are given up: counted and logged by apns-id.
                let lost = unsettled.filter(\.undurable)
                let kept = unsettled.count - lost.count
                if kept > 0 {
                    logger.critical(
                        "audit rows could be neither written nor spooled; they stay in the journal for the next start",
                        metadata: ["rows": "\(kept)"])
                }
                giveUp(lost)
                unsettled = []
                break
            }
        }
        // Rows spooled while catching up or during a blip are replayed before
        // exit if Postgres answers one more try; otherwise they wait on disk
        // for the next start.
        if !replayableSegments().isEmpty {
            if connection == nil { nextConnectAttempt = 0 }
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
        journalCondition.lock()
        writerExited = true
        journalCondition.broadcast()
        journalCondition.unlock()
        waiting.forEach { $0.resume() }
    }

    /// Moves a previous run's journal to the spool, then releases the
    /// segments' holds. On failure they stay (held) and recovery is tried
    /// again, at most once a second, until it succeeds.
    ///
    /// A spool that has no room for the recovered rows (a nearly full disk:
    /// the leftover journal itself fills it) does not wedge it: the rows
    /// then go straight to Postgres, idempotently as replay does, and the
    /// journal segments are deleted, which frees the room; with Postgres
    /// away too, it waits for one of them.
    func recoverLeftoverJournal() {
        guard !leftoverJournal.isEmpty, MonotonicClock.now() >= nextRecoveryAttempt else { return }
        spoolKnownEmptySince = nil
        do {
            let recovered = try recoverJournal(leftoverJournal) { records in
                do {
                    try spool.append(records)
                    spool.sealCurrent()
                } catch {
                    spool.sealCurrent()
                    connectIfDue()
                    guard let connection else { throw error }
                    logger.warning(
                        "no room in the spool for the recovered audit journal; writing its rows straight to Postgres",
                        metadata: ["error": "\(error)", "rows": "\(records.count)"])
                    let rows = records.map {
                        Row(kind: $0.kind == .deadToken ? .deadToken : .audit, format: $0.format, line: $0.line, journalSegment: nil)
                    }
                    do {
                        try insert(rows[...], replay: true, on: connection)
                    } catch let failure {
                        connection.rollbackIfNeeded()
                        dropConnection(after: failure)
                        throw failure
                    }
                    condition.lock()
                    counters.replayed += rows.count { $0.kind != .deadToken }
                    condition.unlock()
                }
            }
            let bytes = spool.totalBytes()
            condition.lock()
            counters.recoveredCompleted = recovered.completed
            counters.recoveredUnknown = recovered.unknown
            counters.spoolBytes = bytes
            for url in leftoverJournal {
                if let number = journal.number(of: url) { journalOutstanding[number] = nil }
            }
            condition.unlock()
        } catch {
            nextRecoveryAttempt = MonotonicClock.now() + MonotonicClock.nanoseconds(1)
            if !recoveryFailureLogged {
                recoveryFailureLogged = true
                logger.critical(
                    "could not recover the audit journal a previous run left; retrying (it stays on disk meanwhile)",
                    metadata: ["error": "\(error)"])
            }
            return
        }
        leftoverJournal = []
    }

    /// Whether the spool holds segments to replay. Listed when it may:
    /// after this thread spooled or recovered rows into it (it clears
    /// ``spoolKnownEmptySince``), when `listing`, and at least once a
    /// second besides (segments put there by hand). A spool found empty is
    /// not listed for every batch: a directory listing, its names filtered,
    /// sorted and made URLs, was ~3,300 instructions a batch (issue 26).
    func spoolHoldsReplayableRows(listing: Bool = false) -> Bool {
        let now = MonotonicClock.now()
        if !listing, let since = spoolKnownEmptySince, now &- since < MonotonicClock.nanoseconds(1) { return false }
        let holds = !replayableSegments().isEmpty
        spoolKnownEmptySince = holds ? nil : now
        return holds
    }

    /// Spool segments to replay, oldest first: all but those of a newer
    /// relay's format, which wait for one (an error logged once each).
    private func replayableSegments() -> [URL] {
        spool.segments().filter { !unreplayableSegments.contains($0) }
    }

    /// Nothing pending for the journal and nothing being written by it.
    private func journalIsIdle() -> Bool {
        journalCondition.lock()
        defer { journalCondition.unlock() }
        return journalPending.isEmpty && !journalBusy
    }

    func connectIfDue() {
        guard connection == nil, MonotonicClock.now() >= nextConnectAttempt else { return }
        // No database configured: every row stays in the spool until a relay
        // with a database replays it.
        guard !configuration.spoolOnly else { return }
        do {
            let connection = try PostgresConnection(conninfo: configuration.conninfo, logger: logger)
            try connection.execute("SET application_name = 'apns-relay audit writer'")
            self.connection = connection
            reconnectDelay = configuration.reconnectMinimumDelay
            lastMaintenance = nil
            setConnected(true)
            condition.lock()
            let now = Date()
            counters.lastConnectedAt = now
            if counters.behindSince != nil, counters.reachableSince == nil { counters.reachableSince = now }
            condition.unlock()
            logger.info("audit writer connected to Postgres")
        } catch {
            nextConnectAttempt = MonotonicClock.now() + MonotonicClock.nanoseconds(reconnectDelay * Double.random(in: 0.8...1.2))
            reconnectDelay = min(reconnectDelay * 2, configuration.reconnectMaximumDelay)
            logger.warning("audit writer cannot reach Postgres; spooling to disk", metadata: ["error": "\(error)"])
        }
    }

    func dropConnection(after error: any Error) {
        connection = nil
        nextConnectAttempt = MonotonicClock.now() + MonotonicClock.nanoseconds(reconnectDelay)
        setConnected(false)
        logger.warning("audit write failed; spooling to disk until Postgres answers", metadata: ["error": "\(error)"])
    }

    private func setConnected(_ connected: Bool) {
        condition.lock()
        counters.connected = connected
        condition.unlock()
    }

    /// Marks the audit caught up (connected, nothing spooled) or behind.
    private func updateBehind(spoolHoldsRows: Bool) {
        guard !configuration.spoolOnly else { return }
        let caughtUp = connection != nil && !spoolHoldsRows && unsettled.isEmpty
        condition.lock()
        if caughtUp {
            counters.behindSince = nil
            counters.reachableSince = nil
        } else if counters.behindSince == nil {
            counters.behindSince = Date()
            // Behind with the connection open (catching up through the
            // spool, a refused batch): Postgres answers from now on.
            if connection != nil { counters.reachableSince = counters.behindSince }
        }
        condition.unlock()
    }

    /// Writes `batch` with COPY; a batch Postgres refuses for its data is
    /// bisected down to the bad rows, which are quarantined; a connection
    /// failure spools whatever is not yet written.
    private func write(_ batch: [Row]) {
        let started = MonotonicClock.now()
        var pending: [ArraySlice<Row>] = [batch[...]]
        while let rows = pending.first {
            pending.removeFirst()
            guard let connection else {
                spoolBatch(Array(rows) + pending.flatMap { $0 })
                return
            }
            do {
                try insert(rows, replay: false, on: connection)
                settleWritten(rows, seconds: Double(MonotonicClock.now() - started) / 1e9)
            } catch let error as PostgresError where error.isDataError && connection.isHealthy {
                connection.rollbackIfNeeded()
                if rows.count == 1 {
                    quarantineRow(rows.first!, error: error)
                } else {
                    let middle = rows.startIndex + rows.count / 2
                    pending.insert(contentsOf: [rows[..<middle], rows[middle...]], at: 0)
                }
            } catch {
                connection.rollbackIfNeeded()
                dropConnection(after: error)
                spoolBatch(Array(rows) + pending.flatMap { $0 })
                return
            }
        }
    }

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

    private func settleWritten(_ rows: ArraySlice<Row>, seconds: Double) {
        let audit = rows.count { $0.kind != .deadToken }
        condition.lock()
        counters.written += audit
        counters.deadTokensUpserted += rows.count - audit
        counters.lastWriteSeconds = seconds
        counters.writeBatches += 1
        settleInJournal(rows)
        condition.unlock()
    }

    /// Keeps a row Postgres refused for its data on disk, counted and logged
    /// (apns-id only: a dead-token row holds a token).
    private func quarantineRow(_ row: Row, error: PostgresError) {
        // Which send (audit rows) or app the row is for, read by column name in the row's own format.
        let apnsID = row.kind == .audit ? configuration.rowLayout.field("apns_id", of: row.line, in: row.format) : nil
        let app =
            row.kind == .audit
            ? configuration.rowLayout.field("app", of: row.line, in: row.format)
            : DeadTokenRecord.field("app", of: row.line)
        do {
            try quarantine.append(
                kind: row.kind, format: row.format, line: row.line, apnsID: apnsID, app: app, error: error, at: UnixTime.nowNanoseconds())
        } catch {
            // Not even the quarantine file: keep the row in the spool path,
            // whose replay will meet the same refusal and try again.
            logger.critical("audit quarantine write failed", metadata: ["error": "\(error)"])
            unsettled.append(row)
            return
        }
        logger.error("audit row refused by Postgres for its data; quarantined, the rest of its batch written", metadata: [
            "sqlstate": "\(error.sqlState ?? "")", "error": "\(error.message)",
            "apns_id": "\(apnsID ?? "")",
            "kind": "\(row.kind == .audit ? "audit" : "dead_token")",
        ])
        condition.lock()
        if row.kind != .deadToken { counters.quarantined += 1 }
        settleInJournal(CollectionOfOne(row))
        condition.unlock()
    }

    private func upsertDeadTokens(_ lines: [[UInt8]], on connection: PostgresConnection) throws {
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

    /// Appends rows to the spool (fsync). If the disk refuses, the rows are
    /// kept and retried with the next batch; they are in the journal, so
    /// even a crash now loses none of them.
    private func spoolBatch(_ batch: [Row]) {
        guard !batch.isEmpty else { return }
        let records = batch.map { AuditSpool.Record(kind: $0.kind == .deadToken ? .deadToken : .audit, format: $0.format, line: $0.line) }
        spoolKnownEmptySince = nil
        do {
            try spool.append(records)
            let audited = batch.count { $0.kind != .deadToken }
            let bytes = spool.totalBytes()
            condition.lock()
            counters.spooled += audited
            counters.spoolBytes = bytes
            settleInJournal(batch)
            condition.unlock()
        } catch {
            unsettled.append(contentsOf: batch)
            let inMemory = batch.count(where: \.undurable)
            logger.critical(
                "audit spool write failed; rows kept and retried (those the journal holds stay there meanwhile)",
                metadata: ["rows": "\(batch.count)", "rows_in_memory_only": "\(inMemory)", "error": "\(error)"])
        }
    }

    /// Replays spool segments oldest first through a temporary table, so a row
    /// already in Postgres (its COPY committed but the answer was lost) is
    /// skipped rather than duplicated. A segment Postgres refuses for its
    /// data is bisected like a live batch: its bad rows are quarantined,
    /// the others written, and the segment removed.
    private func replaySpool() {
        spool.sealCurrent()
        for segment in replayableSegments() {
            guard connection != nil else { return }
            do {
                let contents = try spool.read(segment)
                if let newer = contents.records.first(where: { !configuration.rowLayout.knows($0.format) }) {
                    // Written by a newer relay: its lines hold columns this build
                    // cannot name. Kept whole for a relay that can.
                    unreplayableSegments.insert(segment)
                    logger.error(
                        "audit spool segment holds rows of a newer format than this relay writes; kept on disk for a newer relay to replay",
                        metadata: [
                            "segment": "\(segment.lastPathComponent)", "format": "\(newer.format)",
                            "newest_known_format": "\(configuration.rowLayout.format)",
                        ])
                    continue
                }
                if contents.tornBytes > 0 {
                    logger.warning(
                        "audit spool segment has a torn tail; skipping it",
                        metadata: ["segment": "\(segment.lastPathComponent)", "bytes": "\(contents.tornBytes)"])
                    condition.lock()
                    counters.tornRecords += 1
                    condition.unlock()
                }
                let rows = contents.records.map {
                    Row(kind: $0.kind == .deadToken ? .deadToken : .audit, format: $0.format, line: $0.line, journalSegment: nil)
                }
                var replayed = 0
                var pending: [ArraySlice<Row>] = [rows[...]]
                while let slice = pending.first {
                    pending.removeFirst()
                    guard let connection else { return }
                    do {
                        try insert(slice, replay: true, on: connection)
                        replayed += slice.count { $0.kind != .deadToken }
                    } catch let error as PostgresError where error.isDataError && connection.isHealthy {
                        connection.rollbackIfNeeded()
                        if slice.count == 1 {
                            quarantineRow(slice.first!, error: error)
                        } else {
                            let middle = slice.startIndex + slice.count / 2
                            pending.insert(contentsOf: [slice[..<middle], slice[middle...]], at: 0)
                        }
                    }
                }
                if !unsettled.isEmpty { return }
                try spool.remove(segment)
                let bytes = spool.totalBytes()
                condition.lock()
                counters.replayed += replayed
                counters.spoolBytes = bytes
                condition.unlock()
                logger.info("replayed audit spool segment", metadata: ["segment": "\(segment.lastPathComponent)", "rows": "\(replayed)"])
            } catch {
                if let connection { connection.rollbackIfNeeded() }
                dropConnection(after: error)
                return
            }
        }
    }

    /// Keeps daily partitions ready ahead of time and applies retention, hourly.
    private func maintainPartitionsIfDue() {
        let now = MonotonicClock.now()
        guard let connection, lastMaintenance.map({ now - $0 > 3_600_000_000_000 }) ?? true else { return }
        lastMaintenance = now
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
}

extension PostgresError {
    /// Postgres refused the data itself (SQLSTATE class 22, data exception,
    /// or 23, integrity constraint violation): sending it again cannot help,
    /// unlike a connection failure.
    var isDataError: Bool {
        guard let sqlState else { return false }
        return sqlState.hasPrefix("22") || sqlState.hasPrefix("23")
    }
}

/// A spooled row's format is newer than this build's layout.
struct AuditFormatError: Error, CustomStringConvertible {
    var format: AuditRowFormat
    var newest: AuditRowFormat
    var description: String { "audit row format \(format) is newer than this relay's (\(newest))" }
}

extension AuditWriter {
    /// Hands COPY lines (every column of this build's row format) straight to
    /// the writer thread, as the journal hands it rows once their sends are
    /// durable.
    ///
    /// For `apns-relay bench audit` only, which compares the writer's path to
    /// Postgres with `psql \copy` of the very same lines: rows handed over
    /// here are in no journal, so a crash before they are written loses them.
    package func enqueueEncodedRowsForBenchmark(_ lines: [[UInt8]]) {
        let format = configuration.rowLayout.format
        condition.lock()
        queue.reserveCapacity(queue.count + lines.count)
        for line in lines { queue.append(Row(kind: .audit, format: format, line: line, journalSegment: nil)) }
        condition.broadcast()
        condition.unlock()
    }
}
