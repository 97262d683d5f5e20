import Foundation
public import Logging
public import Relay
public import RelayBasics

/// Turns every finished send into exactly one `apns_audit` row, whatever
/// crashes.
///
/// Two threads of its own, none of Swift's cooperative pool:
///
/// - The **journal**: each send's intent (before its first attempt) and
///   completion (before the caller is answered) are appended to a journal
///   in the spool directory. With `journalSync` `.interval` (the default)
///   the sending thread copies them into the journal's mapped stage
///   (``JournalStage``, no system call) and hands completed rows to the
///   writer; the **journal thread** writes the stage to the segment and
///   `fdatasync`s it, every `journalSyncInterval` while appends arrive. With
///   `.always` the journal thread takes the records, writes many sends per
///   `fdatasync` (group commit), then resumes the waiting sends and hands
///   completed rows to the writer. Either way a relay process killed at any
///   point leaves every answered send's row in the journal (`.interval`: in
///   the kernel's page cache, which outlives the process; a machine crash
///   may lose the last interval); a send that had started but not finished
///   is recovered as a row with outcome `unknown`. Journal segments are
///   deleted, oldest first, once every row in them is in Postgres or the spool.
/// - The **writer thread** owns a blocking libpq connection and drains the
///   rows in batches with COPY: a batch is taken when `batchSize` rows are
///   queued, or `flushInterval` after the previous take, so no row waits
///   longer than that (nor than the previous batch's write) and a steady
///   flow is written in COPYs of about `flushInterval`'s worth of rows,
///   not in one small COPY per round trip. When Postgres is unreachable, or the queue passes its
///   high-water mark, batches go to the disk spool instead; they are
///   replayed, oldest first and idempotently, as soon as Postgres answers
///   again. A batch Postgres refuses for its data is split until the bad
///   row is found; that row is quarantined (kept on disk, counted, listed by
///   `apns-relay audit quarantine`) and every other row is written.
///
/// No path drops a row: what cannot be written is spooled, what cannot be
/// spooled stays in the journal for the next start.
///
/// Durability is checked, not assumed: a journal whose disk refuses a write
/// or a sync stops the relay from taking sends (their intents are refused,
/// the ingress answers 503, `/readyz` fails) until a write or the journal
/// thread's probe succeeds again; a finished send whose completion the
/// journal refused keeps its row in memory, and sends stay refused until
/// that row is written or spooled. A row finally given up is counted
/// (`dropped`) and logged with its apns-id.
///
/// The parts, each with one owner: ``AuditWriterState`` (what is shared and
/// every decision on it, no I/O), ``AuditJournal`` (the journal's files and
/// thread), ``AuditWriterThread`` (the writer thread, the spool) and its
/// ``AuditPostgresSink`` (the connection, partitions, the quarantine
/// split). This type is their front: the calls of the send path and of the
/// relay's lifecycle.
public final class AuditWriter: DurableSendObserver, @unchecked Sendable {
    public let configuration: Configuration
    let logger: Logger
    let shared: AuditWriterShared
    let journal: AuditJournal
    let writerThread: AuditWriterThread
    /// Held from opening until ``shutdown()`` has finished: one writer per spool directory.
    let directoryLock: SpoolDirectoryLock

    /// Opens the spool and finds what a previous run left in the journal;
    /// starts nothing. ``start()`` starts the writer's thread (which
    /// recovers that journal into the spool and replays it) and the
    /// journal's; the relay builds its parts first and starts them in order,
    /// or not at all. ``started(configuration:logger:)`` does both.
    /// Throws ``SpoolDirectoryInUse`` while another writer, in this process
    /// or another, has the spool directory (``SpoolDirectoryLock``).
    public init(opening configuration: Configuration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        let shared = AuditWriterShared()
        self.shared = shared
        let spool = try AuditSpool(directory: configuration.spoolDirectory)
        // Before the journal touches anything a previous run left.
        self.directoryLock = try SpoolDirectoryLock(path: configuration.spoolDirectory)
        if let notLocked = directoryLock.notLocked {
            logger.warning(
                "the audit spool directory cannot be locked; make sure no other relay uses it",
                metadata: ["spool_directory": "\(configuration.spoolDirectory)", "error": "\(notLocked)"])
        }
        let journal = try AuditJournal(configuration: configuration, shared: shared, logger: logger)
        self.journal = journal
        self.writerThread = try AuditWriterThread(
            configuration: configuration, logger: logger, shared: shared, journal: journal, spool: spool,
            leftoverJournal: journal.holdLeftoverSegments())
        let spoolBytes = spool.totalBytes()
        shared.withState { state in
            state.counters.spoolBytes = spoolBytes
            state.counters.databaseConfigured = !configuration.spoolOnly
            if spoolBytes > 0, !configuration.spoolOnly { state.counters.behindSince = Date() }
        }
    }

    /// A writer opened on `configuration` and started: for tools and tests
    /// that use a writer alone.
    public static func started(configuration: Configuration, logger: Logger) throws -> AuditWriter {
        let writer = try AuditWriter(opening: configuration, logger: logger)
        try writer.start()
        return writer
    }

    /// Starts the writer's thread and the journal's. Nothing after the
    /// first call, or after ``shutdown()``. Throws when the system gives no
    /// thread (a pids limit): the relay then does not start.
    public func start() throws(DetachedThread.StartFailure) {
        let starting = shared.withState { state in
            guard !state.threadsStarted, !state.stopping else { return false }
            state.threadsStarted = true
            return true
        }
        guard starting else { return }
        do {
            // The journal's thread first: a writer thread that cannot start
            // then leaves the writer as never started, and its shutdown
            // ends the journal's thread as for any writer that never ran.
            try journal.start()
            try writerThread.start()
        } catch {
            shared.withState { $0.threadsStarted = false }
            throw error
        }
    }

    public func attemptFinished(_ event: AttemptEvent) {}

    /// Journals the send's row (and its dead-token upsert) without waiting:
    /// for paths that cannot suspend. Never waits for a sync.
    public func sendFinished(_ event: SendEvent) {
        if configuration.journalSync == .interval { return journal.appendCompletion(event) }
        journal.enqueue(CollectionOfOne(.completion(event)), continuation: nil)
    }

    /// Journals the send's row and returns once it is durable: appended
    /// (`.interval`, without suspending) or synced (`.always`).
    /// A completion the journal refuses is still queued for the writer,
    /// held in memory (see ``Row/undurable``): the send already went out.
    public func sendFinishedDurably(_ event: SendEvent) async {
        if configuration.journalSync == .interval { return journal.appendCompletion(event) }
        _ = await handOver(CollectionOfOne(.completion(event)))
    }

    /// Journals the send's intent and returns once it is durable: appended
    /// (`.interval`, without suspending) or synced (`.always`). False, and
    /// nothing written, while the journal cannot take records (a write or
    /// sync failed and no probe has succeeded since) or rows of answered
    /// sends wait in memory only; false too when this write fails.
    ///
    /// `.always`: also false at once while a group's write and sync has not
    /// returned for ``journalStallLimit`` seconds (a stalled device, a hung
    /// network volume): a send handed over then would wait behind it with no
    /// bound. Sends already waiting behind it are refused at the same limit
    /// (``AuditJournal/stallWatchFired(now:)``); only the group being synced waits for it.
    public func sendStarting(_ send: SendDescriptor, startedAt: UInt64) async -> Bool {
        if configuration.journalSync == .interval { return journal.appendIntent(send, startedAt: startedAt) }
        if syncStalled(now: MonotonicClock.now()) { return false }
        return await handOver(CollectionOfOne(.intent(send, startedAt: startedAt)))
    }

    /// Seconds a journal record may wait for its `fdatasync` before the sync
    /// counts as stalled: hundreds of sync intervals, so a slow sync on a busy
    /// disk never trips it. `/readyz` fails past it; with `.always` new sends
    /// are refused; the alert APNsRelayAuditJournalSyncStalled uses the same 5 s.
    public static let journalStallLimit = 5.0

    /// `.always`: the journal thread's current write and sync began more than
    /// ``journalStallLimit`` seconds before `now`.
    func syncStalled(now: UInt64) -> Bool {
        guard let since = shared.withState({ $0.counters.journalSyncingSince }) else { return false }
        return now > since &+ MonotonicClock.nanoseconds(configuration.journalStallLimit)
    }

    /// Journals that the send's attempt `attempt` (2, 3, …) is about to
    /// leave and returns once that is durable, as ``sendStarting(_:startedAt:)``
    /// does. The record is the send's intent record again (same key), its
    /// `unknown` row saying `attempt` attempts; recovery keeps the last intent
    /// of a key. Only retries write one: the first attempt is the intent's.
    public func sendRetrying(_ send: SendDescriptor, startedAt: UInt64, attempt: Int) async {
        if configuration.journalSync == .interval {
            journal.appendIntent(send, startedAt: startedAt, attempts: attempt)
            return
        }
        _ = await handOver(CollectionOfOne(.retry(send, startedAt: startedAt, attempt: attempt)))
    }

    /// Returns once everything handed over so far is durable. At once with
    /// `.interval`: every record was appended before its call returned.
    public func waitUntilDurable() async {
        if configuration.journalSync == .interval { return }
        _ = await handOver(CollectionOfOne(.barrier))
    }

    /// `.always`: hands `entries` to the journal thread together and returns
    /// once all are durable (true) or were refused (false).
    func handOver(_ entries: some Collection<JournalEntry>) async -> Bool {
        guard !entries.isEmpty else { return true }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            journal.enqueue(entries, continuation: continuation)
        }
    }

    /// Counters and gauges for metrics and `/readyz`.
    public var statistics: AuditStatistics {
        let journalDepth = journal.pendingCount
        return shared.withState { state in
            var snapshot = state.counters
            snapshot.queueDepth = state.depth + journalDepth
            snapshot.journalUnsynced = state.ledger.unsynced
            snapshot.journalUnsyncedSince = state.ledger.unsyncedSince
            return snapshot
        }
    }

    /// Stops the writer once everything journaled is written or spooled, and
    /// returns when it and the journal thread have exited. Sends that finish later are still
    /// journaled (durably) and reach Postgres from the next start.
    ///
    /// `postgresWithin`: seconds from now the writer may still spend on
    /// Postgres (the drain's bound, less what follows the writer). Past
    /// them a statement in flight is given up and what is left goes to the
    /// spool, so a Postgres that does not answer cannot hold the drain
    /// past its bound. Nil: each statement's own bound only.
    public func shutdown(postgresWithin seconds: Double? = nil) async {
        if let seconds { shared.postgresCutoff.cut(at: MonotonicClock.now() &+ MonotonicClock.nanoseconds(seconds)) }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            shared.condition.lock()
            shared.state.stopping = true
            // Never started (a relay whose start failed): nothing was taken
            // from the journal, which keeps every record for the next start.
            let neverStarted = !shared.state.threadsStarted && !shared.state.finished
            if neverStarted { shared.state.finished = true }
            if shared.state.finished {
                shared.condition.unlock()
                // As the writer's thread does when it exits: a journal thread a send started ends.
                if neverStarted { journal.writerDidExit() }
                continuation.resume()
                return
            }
            shared.exitContinuations.append(continuation)
            shared.condition.broadcast()
            shared.condition.unlock()
        }
        // Then the journal thread's last trim, so a writer opened next on the
        // same directory never races this one's deletions.
        await journal.waitForExit()
        directoryLock.release()
    }

    /// Hands COPY lines (every column of this build's row format) straight to
    /// the writer thread, as the journal hands it rows once their sends are
    /// durable.
    ///
    /// For `apns-relay bench audit` only, which compares the writer's path to
    /// Postgres with `psql \copy` of the very same lines: rows handed over
    /// here are in no journal, so a crash before they are written loses them.
    package func enqueueEncodedRowsForBenchmark(_ lines: [[UInt8]]) {
        let format = configuration.rowLayout.format
        shared.condition.lock()
        shared.state.queue.reserveCapacity(shared.state.queue.count + lines.count)
        for line in lines { shared.state.queue.append(Row(kind: .audit, format: format, line: line, journalSegment: nil)) }
        shared.condition.broadcast()
        shared.condition.unlock()
    }
}
