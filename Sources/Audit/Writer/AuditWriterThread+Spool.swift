import Foundation
import Logging
import RelayBasics

/// The disk spool: rows go there while Postgres is away, and come back,
/// oldest first and idempotently, when it answers.
extension AuditWriterThread {
    /// Appends rows to the spool (fsync). If the disk refuses, the rows are
    /// kept and retried with the next batch; they are in the journal, so
    /// even a crash now loses none of them.
    func spoolBatch(_ batch: [Row]) {
        guard !batch.isEmpty else { return }
        let records = batch.map { AuditSpool.Record(kind: $0.kind == .deadToken ? .deadToken : .audit, format: $0.format, line: $0.line) }
        spoolKnownEmptySince = nil
        do {
            try spool.append(records)
            let audited = batch.count { $0.kind != .deadToken }
            let bytes = spool.totalBytes()
            shared.withState { state in
                state.counters.spooled += audited
                state.counters.spoolBytes = bytes
                state.settle(batch)
            }
            spoolFailureEnded("audit spool writable again")
        } catch {
            unsettled.append(contentsOf: batch)
            noteSpoolWriteFailed(error, rows: batch.count, inMemory: batch.count(where: \.undurable))
        }
    }

    /// How often a spool that keeps failing is logged again: the write is
    /// retried with every batch (each `flush_interval_ms`), and a line each
    /// time (20 a second at the default) would bury the rest of the log
    /// while the disk stays full.
    static let spoolFailureReportInterval = MonotonicClock.nanoseconds(10)

    /// The rows that failed spool writes kept are settled (`message` says
    /// where): the failures end, and one line says how many there were.
    func spoolFailureEnded(_ message: Logger.Message) {
        guard let failing = spoolFailing else { return }
        spoolFailing = nil
        logger.notice(
            message,
            metadata: [
                "failed_writes": "\(failing.failures)",
                "seconds_failing": "\(Double((MonotonicClock.now() &- failing.since) / 1_000_000) / 1000)",
            ])
    }

    /// Logs a failed spool write: the first at once, then at most one line
    /// per ``spoolFailureReportInterval`` with how many failed since the last.
    private func noteSpoolWriteFailed(_ error: any Error, rows: Int, inMemory: Int) {
        let now = MonotonicClock.now()
        var failing = spoolFailing ?? SpoolFailing(since: now, lastReport: nil, failures: 0, unreported: 0)
        failing.failures += 1
        failing.unreported += 1
        defer { spoolFailing = failing }
        if let last = failing.lastReport, now &- last < Self.spoolFailureReportInterval { return }
        logger.critical(
            "audit spool write failed; rows kept and retried (those the journal holds stay there meanwhile)",
            metadata: [
                "rows": "\(rows)", "rows_in_memory_only": "\(inMemory)", "error": "\(error)",
                "failed_writes_since_last_report": "\(failing.unreported)",
            ])
        failing.lastReport = now
        failing.unreported = 0
    }

    /// Replays spool segments oldest first through a temporary table, so a row
    /// already in Postgres (its COPY committed but the answer was lost) is
    /// skipped rather than duplicated. A segment Postgres refuses for its
    /// data is bisected like a live batch: its bad rows are quarantined,
    /// the others written, and the segment removed.
    func replaySpool() {
        spool.sealCurrent()
        for segment in replayableSegments() {
            guard sink.isConnected else { return }
            let contents: AuditSpool.SegmentContents
            do {
                contents = try spool.read(segment)
            } catch {
                // As a failed write: the spool is retried after the reconnect's backoff.
                sink.dropConnection(after: error)
                return
            }
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
                shared.withState { $0.counters.tornRecords += 1 }
            }
            let rows = contents.records.map {
                Row(kind: $0.kind == .deadToken ? .deadToken : .audit, format: $0.format, line: $0.line, journalSegment: nil)
            }
            var replayed = 0
            let unwritten = sink.write(rows[...], replay: true) { settlement in
                switch settlement {
                case .written(let rows): replayed += rows.count { $0.kind != .deadToken }
                case .quarantined(let row): settleQuarantined(row)
                case .unquarantined(let row): unsettled.append(row)
                }
            }
            // Postgres went away (the sink dropped the connection), or a
            // refused row could not be quarantined: the segment stays.
            if !unwritten.isEmpty || !unsettled.isEmpty { return }
            do {
                try spool.remove(segment)
            } catch {
                sink.dropConnection(after: error)
                return
            }
            let bytes = spool.totalBytes()
            shared.withState { state in
                state.counters.replayed += replayed
                state.counters.spoolBytes = bytes
            }
            logger.info("replayed audit spool segment", metadata: ["segment": "\(segment.lastPathComponent)", "rows": "\(replayed)"])
        }
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
    func replayableSegments() -> [URL] {
        spool.segments().filter { !unreplayableSegments.contains($0) }
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
        guard !leftover.segments.isEmpty, MonotonicClock.now() >= leftover.nextAttempt else { return }
        spoolKnownEmptySince = nil
        do {
            let recovered = try journal.recover(leftover.segments) { records in
                do {
                    try spool.append(records)
                    spool.sealCurrent()
                } catch {
                    spool.sealCurrent()
                    sink.connectIfDue()
                    guard sink.isConnected else { throw error }
                    logger.warning(
                        "no room in the spool for the recovered audit journal; writing its rows straight to Postgres",
                        metadata: ["error": "\(error)", "rows": "\(records.count)"])
                    let rows = records.map {
                        Row(kind: $0.kind == .deadToken ? .deadToken : .audit, format: $0.format, line: $0.line, journalSegment: nil)
                    }
                    try sink.writeRecovered(rows)
                    shared.withState { $0.counters.replayed += rows.count { $0.kind != .deadToken } }
                }
            }
            let bytes = spool.totalBytes()
            shared.withState { state in
                state.counters.recoveredCompleted = recovered.completed
                state.counters.recoveredUnknown = recovered.unknown
                state.counters.spoolBytes = bytes
                for url in leftover.segments {
                    if let number = journal.files.number(of: url) { state.ledger.forget(number) }
                }
            }
        } catch {
            leftover.nextAttempt = MonotonicClock.now() + MonotonicClock.nanoseconds(1)
            if !leftover.failureLogged {
                leftover.failureLogged = true
                logger.critical(
                    "could not recover the audit journal a previous run left; retrying (it stays on disk meanwhile)",
                    metadata: ["error": "\(error)"])
            }
            return
        }
        leftover.segments = []
    }
}
