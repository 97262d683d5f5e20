import Foundation
import Logging
import RelayBasics

/// The writer thread and what it alone uses: takes batches of journaled
/// rows from the queue (as ``AuditWriterState`` decides) and brings them to
/// Postgres through the ``AuditPostgresSink``, or to the disk spool while
/// Postgres is away or the queue is past its high-water mark; replays the
/// spool, oldest first and idempotently, as soon as Postgres answers again;
/// recovers what a previous run left in the journal.
final class AuditWriterThread: @unchecked Sendable {
    typealias Row = AuditWriter.Row

    /// A previous run's journal segments, until recovered into the spool.
    struct LeftoverJournal {
        var segments: [URL] = []
        /// Not before this is recovering them tried again.
        var nextAttempt: UInt64 = 0
        var failureLogged = false
    }

    let configuration: AuditWriter.Configuration
    let logger: Logger
    let shared: AuditWriterShared
    let journal: AuditJournal
    let spool: AuditSpool
    let sink: AuditPostgresSink
    /// Rows a failed spool write left behind, retried first.
    var unsettled: [Row] = []
    /// Since when spool writes have failed, and how often (their log lines
    /// are spaced out); nil while they succeed.
    var spoolFailing: SpoolFailing?
    struct SpoolFailing {
        var since: UInt64
        var lastReport: UInt64?
        var failures: Int
        var unreported: Int
    }
    var leftover: LeftoverJournal
    /// When the spool was last listed and found with nothing to replay; nil
    /// when it may hold rows (``spoolHoldsReplayableRows(listing:)``).
    var spoolKnownEmptySince: UInt64?
    /// Spool segments holding rows of a format newer than this build knows
    /// (a relay rolled back): kept on disk for a newer relay, not replayed.
    var unreplayableSegments: Set<URL> = []
    /// When rows were last taken from the queue (``MonotonicClock``): rows
    /// queued since then wait for a full batch until `flushInterval` after it.
    var lastTake: UInt64 = 0

    init(
        configuration: AuditWriter.Configuration, logger: Logger, shared: AuditWriterShared, journal: AuditJournal, spool: AuditSpool,
        leftoverJournal: [URL]
    ) throws {
        self.configuration = configuration
        self.logger = logger
        self.shared = shared
        self.journal = journal
        self.spool = spool
        self.leftover = LeftoverJournal(segments: leftoverJournal)
        self.sink = try AuditPostgresSink(configuration: configuration, logger: logger, cutoff: shared.postgresCutoff) { [shared] change in
            shared.withState { state in
                switch change {
                case .opened: state.noteConnection(true, now: Date())
                case .dropped: state.noteConnection(false, now: Date())
                case .unanswered: state.notePostgresUnanswered()
                }
            }
        }
    }

    /// Starts the thread.
    func start() throws(DetachedThread.StartFailure) {
        try DetachedThread.start(name: "relay-audit") { [self] in run() }
    }

    /// Take a batch, replay the spool if Postgres is back, write or spool
    /// the batch, repeat until shutdown has drained the queue and the
    /// journal has nothing left to hand over.
    private func run() {
        recoverLeftoverJournal()
        while true {
            let take = takeBatch()
            var batch = take.batch
            formatLines(of: &batch)
            if !unsettled.isEmpty {
                batch = unsettled + batch
                unsettled = []
            }
            sink.connectIfDue()
            recoverLeftoverJournal()
            // Only this thread adds spool segments, so what it does between
            // here and `markBehind` is known without listing again, and an
            // empty spool stays empty until it spools (``spoolHoldsReplayableRows(listing:)``).
            var spoolHoldsRows = spoolHoldsReplayableRows()
            if sink.isConnected, spoolHoldsRows {
                replaySpool()
                spoolHoldsRows = spoolHoldsReplayableRows(listing: true)
            }
            if sink.isConnected { sink.maintainPartitionsIfDue() }
            let destination = AuditWriterState.destination(
                batchIsEmpty: batch.isEmpty, connected: sink.isConnected, catchingUp: take.catchingUp, spoolHoldsRows: spoolHoldsRows)
            switch destination {
            case .postgres: write(batch)
            case .spool:
                spoolBatch(batch)
                spoolHoldsRows = true
            case .nowhere: break
            }
            // `write` spools only after dropping the connection, which counts as behind by itself.
            markBehind(spoolHoldsRows: spoolHoldsRows)
            if take.exiting { break }
        }
        finish()
    }

    /// Formats the lines of the finished sends' rows, which the sending
    /// tasks queued as values (``AuditWriter/Row/pending``): here, a batch
    /// at a time on this thread, the formatting code stays in the cache from
    /// one row to the next, and the pool's two threads never run it.
    private func formatLines(of batch: inout [Row]) {
        let layout = configuration.rowLayout
        let relayInstance = configuration.relayInstance
        for index in batch.indices where batch[index].pending != nil {
            batch[index] = batch[index].formatted(layout: layout, relayInstance: relayInstance)
        }
    }

    /// Waits as the state says, then takes a batch.
    private func takeBatch() -> AuditWriterState.Take {
        let flushInterval = MonotonicClock.nanoseconds(configuration.flushInterval)
        // Read under the lock, with the clock read afresh after every wait.
        func pause() -> AuditWriterState.Pause {
            shared.state.pause(
                now: MonotonicClock.now(), lastTake: lastTake, flushInterval: flushInterval, batchSize: configuration.batchSize,
                journalIdle: journal.isIdle)
        }
        shared.condition.lock()
        switch pause() {
        case .idle(let until):
            shared.condition.wait(until: until)
        case .filling:
            // Until the batch is full, stopping begins, or the flush is due.
            while case .filling(let due) = pause() { shared.condition.wait(until: due) }
        case .none:
            break
        }
        lastTake = MonotonicClock.now()
        shared.condition.unlock()
        // Read after any wait and before the queue: once the journal is
        // idle, every row it took is already queued.
        let journalIdle = journal.isIdle()
        return shared.withState {
            $0.take(batchSize: configuration.batchSize, highWaterMark: configuration.highWaterMark, journalIdle: journalIdle)
        }
    }

    /// The last pass is done. The spool may have refused the last rows:
    /// those the journal holds stay there for the next start; those it
    /// refused (in memory only) are given up, counted and logged by
    /// apns-id. Rows spooled while catching up or during a blip are
    /// replayed before exit if Postgres answers one more try; otherwise they
    /// wait on disk for the next start.
    private func finish() {
        if !unsettled.isEmpty {
            let lost = unsettled.filter(\.undurable)
            let kept = unsettled.count - lost.count
            if kept > 0 {
                logger.critical(
                    "audit rows could be neither written nor spooled; they stay in the journal for the next start",
                    metadata: ["rows": "\(kept)"])
            }
            shared.giveUp(lost, layout: configuration.rowLayout, logger: logger)
            unsettled = []
        }
        if !replayableSegments().isEmpty {
            sink.connectNow()
            if sink.isConnected { replaySpool() }
        }
        spool.sealCurrent()
        sink.disconnect()
        shared.condition.lock()
        shared.state.finished = true
        shared.state.counters.connected = false
        let waiting = shared.exitContinuations
        shared.exitContinuations = []
        shared.condition.unlock()
        journal.writerDidExit()
        waiting.forEach { $0.resume() }
    }

    /// Marks the audit caught up (connected, nothing spooled) or behind.
    private func markBehind(spoolHoldsRows: Bool) {
        guard !configuration.spoolOnly else { return }
        let connected = sink.isConnected
        let caughtUp = connected && !spoolHoldsRows && unsettled.isEmpty
        shared.withState { $0.markBehind(caughtUp: caughtUp, connected: connected, now: Date()) }
    }

    /// Writes `batch` with COPY; a batch Postgres refuses for its data is
    /// bisected down to the bad rows, which are quarantined; a connection
    /// failure spools whatever is not yet written.
    private func write(_ batch: [Row]) {
        let started = MonotonicClock.now()
        // Until it returns, the audit counts as behind from now: a write
        // Postgres holds (a locked table, a frozen server) shows in
        // apns_relay_audit_behind_seconds before its bound ends it.
        shared.withState { $0.counters.writingSince = Date() }
        defer { shared.withState { $0.counters.writingSince = nil } }
        let unwritten = sink.write(batch[...], replay: false) { settlement in
            switch settlement {
            case .written(let rows):
                let seconds = Double(MonotonicClock.now() - started) / 1e9
                let audit = rows.count { $0.kind != .deadToken }
                shared.withState { state in
                    state.counters.written += audit
                    state.counters.deadTokensUpserted += rows.count - audit
                    state.counters.lastWriteSeconds = seconds
                    state.counters.writeBatches += 1
                    state.settle(rows)
                }
            case .quarantined(let row): settleQuarantined(row)
            case .unquarantined(let row): unsettled.append(row)
            }
        }
        if unwritten.isEmpty, unsettled.isEmpty { spoolFailureEnded("audit rows kept after failed spool writes reached Postgres") }
        spoolBatch(unwritten)
    }

    /// A row kept in the quarantine file: counted, and settled in the journal.
    func settleQuarantined(_ row: Row) {
        shared.withState { state in
            if row.kind != .deadToken { state.counters.quarantined += 1 }
            state.settle(CollectionOfOne(row))
        }
    }
}
