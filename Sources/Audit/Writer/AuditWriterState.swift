import Foundation
import RelayBasics

/// The audit writer's shared state and every decision made on it, with no
/// threads, locks, files or Postgres: what the writer thread takes, where a
/// batch goes, when it exits, what each journal segment still holds, and
/// whether new sends may start. In the manner of postgres-nio's
/// `ConnectionStateMachine`: the owners of the I/O (``AuditJournal``,
/// ``AuditWriterThread``, ``AuditPostgresSink``) do what it decides, and it
/// is unit-tested alone (`AuditWriterStateTests`).
///
/// Guarded by ``AuditWriterShared/condition``.
struct AuditWriterState {
    typealias Row = AuditWriter.Row

    /// The writer thread's input: rows of journaled sends, oldest first,
    /// from `queueHead` on.
    var queue: [Row] = []
    var queueHead = 0
    /// ``AuditWriter/shutdown()`` was called: the writer drains and exits.
    var stopping = false
    /// The writer thread has exited (or was never started and never will).
    var finished = false
    /// ``AuditWriter/start()`` has started the writer's thread.
    var threadsStarted = false
    var counters = AuditStatistics()
    var ledger = AuditJournalLedger()
    /// Rows the journal refused after the writer had exited: given up.
    var lateUndurable: [Row] = []
    /// The journal's last write (an append) or its last sync failed; cleared
    /// by a write, or a sync, or the journal thread's probe that succeeds.
    /// ``AuditStatistics/journalFailing`` is either.
    var journalWriteFailed = false
    var journalSyncFailed = false

    /// Rows queued and not yet taken.
    var depth: Int { queue.count - queueHead }
}

// MARK: - Taking rows

extension AuditWriterState {
    /// What the writer thread does before it takes rows.
    enum Pause: Equatable {
        /// Nothing queued (or stopping while the journal still hands over
        /// its last group): one timed wait, then a pass.
        case idle(until: UInt64)
        /// A partial batch waits for more rows until this instant.
        case filling(until: UInt64)
        /// Take now.
        case none
    }

    /// A partial batch waits for more rows until `flushInterval` after the
    /// previous take (enqueuers wake the writer at a full batch, and
    /// shutdown at once). Taking whatever arrived during the last COPY
    /// instead made a steady flow of single sends into COPYs of a few rows,
    /// and Postgres' fixed cost per statement and transaction then exceeded
    /// its cost per row. All instants are ``MonotonicClock`` nanoseconds: a
    /// take measured on the wall clock, stepped back since, lay in the
    /// future and the rows waited out the step.
    func pause(now: UInt64, lastTake: UInt64, flushInterval: UInt64, batchSize: Int, journalIdle: () -> Bool) -> Pause {
        // Stopping, the writer still waits while the journal hands over its last group.
        if depth == 0, !stopping || !journalIdle() { return .idle(until: now + flushInterval) }
        let due = lastTake + flushInterval
        return !stopping && depth < batchSize && now < due ? .filling(until: due) : .none
    }

    /// The rows of one pass.
    struct Take {
        var batch: [Row]
        /// The queue is past its high-water mark: the batch goes to the spool.
        var catchingUp: Bool
        /// Stopping, the journal idle and the queue empty: the last pass.
        var exiting: Bool
    }

    /// Takes a batch: up to `batchSize` rows, or every row while the queue
    /// is past `highWaterMark`. `journalIdle` must be read before the take:
    /// once the journal is idle, every row it took is already queued.
    mutating func take(batchSize: Int, highWaterMark: Int, journalIdle: Bool) -> Take {
        let available = depth
        let catchingUp = available > highWaterMark
        let count = catchingUp ? available : min(available, batchSize)
        let batch = Array(queue[queueHead..<(queueHead + count)])
        queueHead += count
        if queueHead > 4096, queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
        return Take(batch: batch, catchingUp: catchingUp, exiting: stopping && journalIdle && depth == 0)
    }

    /// Where a batch goes.
    enum Destination: Equatable {
        case nowhere, postgres, spool
    }

    /// Rows must reach Postgres in order: while older rows wait in the
    /// spool, newer ones queue behind them there; without a connection, or
    /// catching up, they go to the spool too.
    static func destination(batchIsEmpty: Bool, connected: Bool, catchingUp: Bool, spoolHoldsRows: Bool) -> Destination {
        if batchIsEmpty { return .nowhere }
        return connected && !catchingUp && !spoolHoldsRows ? .postgres : .spool
    }

    /// Whether an append or hand-over should wake the writer: a full batch
    /// waits, or shutdown drains.
    func wakesWriter(batchSize: Int) -> Bool { depth >= batchSize || stopping }
}

// MARK: - Being behind

extension AuditWriterState {
    /// Marks the audit caught up (connected, nothing spooled or unsettled) or behind, at `now`.
    mutating func markBehind(caughtUp: Bool, connected: Bool, now: Date) {
        if caughtUp {
            counters.behindSince = nil
            counters.reachableSince = nil
        } else if counters.behindSince == nil {
            counters.behindSince = now
            // Behind with the connection open (catching up through the
            // spool, a refused batch): Postgres answers from now on.
            if connected { counters.reachableSince = now }
        }
    }

    /// Postgres did not answer a connect or statement within its bound: the
    /// fault is the database's (locked, frozen, unreachable), shared by every
    /// relay on it, so the time it "answered" starts again at the next
    /// connection (``AuditStatistics/stuckWhileReachable(limit:now:)``).
    mutating func notePostgresUnanswered() {
        counters.postgresTimeouts += 1
        counters.reachableSince = nil
    }

    /// A connection to Postgres opened (`connected`) or was dropped, at `now`.
    mutating func noteConnection(_ connected: Bool, now: Date) {
        counters.connected = connected
        guard connected else { return }
        counters.lastConnectedAt = now
        if counters.behindSince != nil, counters.reachableSince == nil { counters.reachableSince = now }
    }
}

// MARK: - Durability

extension AuditWriterState {
    /// A change of the journal's health, logged once per change (not per send).
    enum JournalHealthChange: Equatable {
        case failed(operation: String, error: String)
        case recovered
    }

    /// Whether an intent may be journaled now: the journal takes records and
    /// no answered send's row waits in memory only.
    var intentsAccepted: Bool { !counters.journalFailing && counters.undurableRows == 0 }

    /// Notes how a journal write (`sync` false) or sync went; returns the
    /// change to log (after unlocking).
    mutating func noteJournal(sync: Bool, failure: (any Error)?) -> JournalHealthChange? {
        let wasFailing = counters.journalFailing
        if sync { journalSyncFailed = failure != nil } else { journalWriteFailed = failure != nil }
        counters.journalFailing = journalWriteFailed || journalSyncFailed
        if let failure, !wasFailing { return .failed(operation: sync ? "sync" : "write", error: "\(failure)") }
        if wasFailing, !counters.journalFailing { return .recovered }
        return nil
    }

    /// The journal thread's probe wrote and synced: the journal takes records again.
    mutating func noteProbeSucceeded() -> JournalHealthChange? {
        let wasFailing = counters.journalFailing
        journalWriteFailed = false
        journalSyncFailed = false
        counters.journalFailing = false
        return wasFailing ? .recovered : nil
    }

    /// Records an append of the sending thread (`.interval`) that went to
    /// `segment` (nil: refused). True when it is the first since the
    /// journal thread's last sync, which may be idle: wake it.
    mutating func noteAppend(segment: Int?, now: @autoclosure () -> UInt64 = MonotonicClock.now()) -> Bool {
        counters.journalCommits += 1
        guard let segment else { return false }
        let wake = ledger.unsynced == 0
        // The clock is read once per sync interval, not once per send.
        if wake { ledger.unsyncedSince = now() }
        ledger.unsynced += 1
        ledger.currentSegment = segment
        return wake
    }

    /// The rows the journal refused after the writer exited, to give up (once).
    mutating func takeLateUndurable() -> [Row] {
        defer { lateUndurable = [] }
        return lateUndurable
    }
}

// MARK: - The ledger

extension AuditWriterState {
    /// Enters a journaled record (`segment` nil: the journal refused it):
    /// an intent's segment; a completion's rows queued for the writer, its
    /// intent answered.
    mutating func enter(_ item: AuditWriter.JournalItem, segment: Int?, format: AuditRowFormat) {
        if item.intent {
            if let segment { ledger.enterIntent(item, segment: segment) }
            return
        }
        guard let segment else { return enterUndurable(item, format: format) }
        queue.append(Row(kind: .audit, format: format, line: [], journalSegment: segment, pending: item.completion))
        if let dead = item.dead {
            queue.append(Row(kind: .deadToken, format: format, line: dead, journalSegment: segment))
        }
        ledger.enterCompletion(of: item.key, rows: item.dead == nil ? 1 : 2, segment: segment)
    }

    /// Queues a completion's rows the journal refused (see ``AuditWriter/Row/undurable``):
    /// held in memory until written or spooled, and held in the ledger by
    /// their intent's segment, so a crash meanwhile still recovers the send
    /// (as outcome `unknown`) rather than nothing.
    private mutating func enterUndurable(_ item: AuditWriter.JournalItem, format: AuditRowFormat) {
        // The intent's hold on its segment passes to the rows.
        let hold = ledger.openIntents.removeValue(forKey: item.key)?.segment
        var rows = [Row(kind: .audit, format: format, line: [], journalSegment: hold, undurable: true, pending: item.completion)]
        if let dead = item.dead { rows.append(Row(kind: .deadToken, format: format, line: dead, journalSegment: hold, undurable: true)) }
        if let hold { ledger.outstanding[hold, default: 0] += rows.count - 1 }
        counters.undurableRows += rows.count
        if finished {
            // No writer left to write them: given up (counted, logged) by
            // the caller once the lock is released.
            lateUndurable.append(contentsOf: rows)
        } else {
            queue.append(contentsOf: rows)
        }
    }

    /// Settles rows the writer wrote, spooled or quarantined: their journal
    /// segments no longer need to hold them.
    mutating func settle(_ rows: some Collection<Row>) {
        // A batch's rows mostly come from one or two segments: one update
        // of the ledger per run of rows of a segment, not one per row.
        var run: (segment: Int, rows: Int)?
        for row in rows {
            if row.undurable { counters.undurableRows -= 1 }
            guard let segment = row.journalSegment else { continue }
            if run?.segment == segment {
                run!.rows += 1
            } else {
                if let run { ledger.outstanding[run.segment, default: 0] -= run.rows }
                run = (segment, 1)
            }
        }
        if let run { ledger.outstanding[run.segment, default: 0] -= run.rows }
    }

    /// Counts rows given up (dead-token upserts are not audit rows) and no
    /// longer held in memory.
    mutating func noteGivenUp(_ rows: some Collection<Row>) {
        counters.dropped += rows.count { $0.kind != .deadToken }
        counters.undurableRows -= rows.count
    }
}
