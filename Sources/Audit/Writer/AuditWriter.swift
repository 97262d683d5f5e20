public import Foundation
public import Logging
public import Relay
import RelayBasics

/// Turns every finished send into exactly one `apns_audit` row, whatever
/// crashes.
///
/// Two threads of its own, none of Swift's cooperative pool:
///
/// - The **journal**: each send's intent (before its first attempt) and
///   completion (before the caller is answered) are appended to a journal
///   in the spool directory. With `journalSync` `.interval` (the default)
///   the sending thread appends them itself with one `write(2)` and hands
///   completed rows to the writer; the **journal thread** only
///   `fdatasync`s, every `journalSyncInterval` while appends arrive. With
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
public final class AuditWriter: DurableSendObserver, @unchecked Sendable {
    // Shared state is guarded by `condition`; the connection and the spool
    // are used only by the writer thread; the journal by the journal thread
    // (`.always`), or under `condition` by the sending threads and the
    // journal thread (`.interval`), and by `init` before either starts.

    /// Settings of the writer.
    public struct Configuration: Sendable {
        /// A libpq connection string or URL; empty uses the PG* variables.
        public var conninfo: String
        /// No database: rows stay in the spool for a later relay to replay.
        public var spoolOnly = false
        /// Directory for spool segments, the journal and the quarantine (created if missing).
        public var spoolDirectory: String
        /// Written to every row's `relay_instance`.
        public var relayInstance: String
        public var batchSize = 500
        /// Longest a row waits in the queue before a partial batch is flushed, seconds.
        public var flushInterval = 0.05
        /// Past this depth batches go straight to the spool to catch up.
        public var highWaterMark = 50_000
        public var reconnectMinimumDelay = 0.2
        public var reconnectMaximumDelay = 10.0
        /// Daily partitions kept ready ahead of today.
        public var partitionDaysAhead = 7
        /// Drop partitions older than this many days (nil keeps everything).
        public var retentionDays: Int?
        /// Journal segment size before a new one is started, bytes.
        public var journalSegmentBytes = 4 << 20
        /// How the journal reaches the disk (`audit.journal_sync`).
        public var journalSync = JournalSync.interval
        /// `.interval`: seconds between the journal thread's `fdatasync`s
        /// while appends arrive (`audit.journal_sync_interval_ms`): what a
        /// machine crash or power cut can lose at most.
        public var journalSyncInterval = 0.01
        /// `.interval`: how long an idle journal thread waits before it
        /// looks again (and trims settled segments); tests shorten it.
        var journalIdleWake = 1.0
        /// The row's columns (tests describe a later layout with it).
        var rowLayout = AuditRowLayout.standard

        public init(conninfo: String, spoolDirectory: String, relayInstance: String) {
            self.conninfo = conninfo
            self.spoolDirectory = spoolDirectory
            self.relayInstance = relayInstance
        }
    }

    /// A row on its way to Postgres: its COPY line, and the journal segment
    /// that holds it until it is written or spooled (nil once it is on disk elsewhere).
    struct Row {
        var kind: AuditSpool.Kind
        /// The layout `line` was written in: older than the writer's for rows replayed from the spool.
        var format: AuditRowFormat
        var line: [UInt8]
        var journalSegment: Int?
        /// Its completion could not be journaled: until it is written or
        /// spooled it is in memory only (its segment, if any, is its
        /// intent's, held so the send is at least recovered as `unknown`),
        /// and the relay takes no new sends.
        var undurable = false
    }

    /// An intent in the ledger (``openIntents``).
    struct OpenIntent {
        var segment: Int
        var fields: AuditIntentFields?
    }

    /// When a journal record counts as durable.
    public enum JournalSync: String, Sendable, CaseIterable {
        /// Appended with `write(2)` by the sending thread, no wait: it
        /// survives a crash of the process at once, and a crash of the
        /// machine once the journal thread's next `fdatasync` (every
        /// `journalSyncInterval`) has run.
        case interval
        /// The send waits until its record is written and `fdatasync`ed by
        /// the journal thread (group commit): a machine crash loses no
        /// answered send either, for two thread round trips per send.
        case always
    }

    /// What the journal thread is asked to make durable (`.always`).
    /// Encoded on the journal thread, not on the sending task: the
    /// cooperative pool has two threads and they are the scarce resource.
    enum JournalEntry {
        case intent(SendDescriptor, startedAt: UInt64)
        /// The send's intent again, before retry `attempt` leaves: it
        /// supersedes the earlier one (``AuditWriter/sendRetrying(_:startedAt:attempt:)``).
        case retry(SendDescriptor, startedAt: UInt64, attempt: Int)
        case completion(SendEvent)
        /// Nothing to write: resumes its waiter once everything before it is durable.
        case barrier
    }

    public let configuration: Configuration
    let logger: Logger
    /// Guards the writer's shared state; its timed waits are monotonic.
    let condition = MonotonicCondition()

    // Writer thread's input.
    var queue: [Row] = []
    var queueHead = 0
    var stopping = false
    var finished = false
    /// ``start()`` has started the writer's thread.
    var threadsStarted = false
    var counters = AuditStatistics()
    var exitContinuations: [CheckedContinuation<Void, Never>] = []

    // Journal thread's input, guarded by `journalCondition` (its own, so a
    // send handing over an entry wakes the journal thread and not the writer).
    let journalCondition = MonotonicCondition()
    var journalPending: [(JournalEntry, CheckedContinuation<Bool, Never>?)] = []
    var journalBusy = false
    var journalThreadRunning = false
    /// Set by the writer thread as it exits: the journal thread may stop when idle.
    var writerExited = false
    /// `shutdown()` callers waiting for the journal thread's last trim.
    var journalExitContinuations: [CheckedContinuation<Void, Never>] = []
    /// `.interval`: an append found the journal synced and asks the journal
    /// thread for the next sync.
    var journalWakeRequested = false

    // The ledger of what each journal segment still holds, guarded by `condition`.
    /// Rows (and open intents) each journal segment holds that are not yet
    /// in Postgres or the spool.
    var journalOutstanding: [Int: Int] = [:]
    /// The segment of each intent whose completion has not been journaled,
    /// and the send's fields of its line (``AuditIntentFields``) that the
    /// completion's line copies.
    var openIntents: [AuditJournalKey: OpenIntent] = [:]
    /// The segment the journal last appended to.
    var journalCurrentSegment: Int?
    /// `.interval`: appends since the journal thread last took the journal to sync.
    var journalUnsynced = 0
    /// Rows the journal refused after the writer had exited: given up.
    var lateUndurable: [Row] = []
    /// The journal's last write (an append) or its last sync failed; cleared
    /// by a write, or a sync, or the journal thread's probe that succeeds.
    /// Guarded by `condition`; ``AuditStatistics/journalFailing`` is either.
    var journalWriteFailed = false
    var journalSyncFailed = false
    /// Journal thread only: the segment current at its last trim.
    var lastTrimmedSegment: Int?

    let spool: AuditSpool
    let journal: AuditSpool
    let quarantine: AuditQuarantine
    var connection: PostgresConnection?
    // The writer thread's pacing, in ``MonotonicClock/now()``'s
    // nanoseconds: a step of the wall clock must not stall or hurry it.
    /// Not before this does the writer try to connect again.
    var nextConnectAttempt: UInt64 = 0
    var reconnectDelay: Double
    /// When partitions were last maintained (nil: not yet on this connection).
    var lastMaintenance: UInt64?
    /// When the writer thread last took rows from the queue: rows queued
    /// since then wait for a full batch until `flushInterval` after it.
    var lastTake: UInt64 = 0
    /// Rows a failed spool write left behind, retried first.
    var unsettled: [Row] = []
    /// Not before this is recovering the leftover journal tried again.
    var nextRecoveryAttempt: UInt64 = 0
    var recoveryFailureLogged = false
    /// Journal segments a previous run left, for the writer thread to recover.
    var leftoverJournal: [URL] = []
    /// When the writer thread last listed the spool and found nothing to
    /// replay; nil when it may hold rows (``spoolHoldsReplayableRows(listing:)``).
    var spoolKnownEmptySince: UInt64?
    /// Spool segments holding rows of a format newer than this build knows
    /// (a relay rolled back): kept on disk for a newer relay, not replayed.
    var unreplayableSegments: Set<URL> = []

    /// Opens the spool and finds what a previous run left in the journal;
    /// starts nothing. ``start()`` starts the writer's thread (which
    /// recovers that journal into the spool and replays it) and the
    /// journal's; the relay builds its parts first and starts them in order,
    /// or not at all. ``started(configuration:logger:)`` does both.
    public init(opening configuration: Configuration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.spool = try AuditSpool(directory: configuration.spoolDirectory)
        self.journal = try AuditSpool(
            directory: configuration.spoolDirectory, segmentLimit: configuration.journalSegmentBytes, prefix: "journal-",
            suffix: ".journal")
        self.quarantine = try AuditQuarantine(directory: configuration.spoolDirectory + "/quarantine")
        self.reconnectDelay = configuration.reconnectMinimumDelay
        // What a previous run left in the journal is recovered by the writer
        // thread (disk reads and an fsync have no place on the caller, which
        // may be on the cooperative pool). Until then those segments are held
        // in the ledger, and new ones are numbered after them.
        leftoverJournal = journal.segments()
        for url in leftoverJournal {
            guard let number = journal.number(of: url) else { continue }
            journalOutstanding[number] = 1
            journal.reserveNumbers(through: number)
        }
        counters.spoolBytes = spool.totalBytes()
        counters.databaseConfigured = !configuration.spoolOnly
        if counters.spoolBytes > 0, !configuration.spoolOnly { counters.behindSince = Date() }
    }

    /// A writer opened on `configuration` and started: for tools and tests
    /// that use a writer alone.
    public static func started(configuration: Configuration, logger: Logger) throws -> AuditWriter {
        let writer = try AuditWriter(opening: configuration, logger: logger)
        writer.start()
        return writer
    }

    /// Starts the writer's thread and the journal's. Nothing after the
    /// first call, or after ``shutdown()``.
    public func start() {
        condition.lock()
        guard !threadsStarted, !stopping else {
            condition.unlock()
            return
        }
        threadsStarted = true
        condition.unlock()
        let thread = Thread { [self] in
            // Named from inside: on Linux a name set before the start never
            // reaches the system's (`comm`: top -H, /proc, gdb), nor does one
            // over 15 bytes.
            Thread.current.name = "relay-audit"
            run()
        }
        thread.start()
        journalCondition.lock()
        startJournalThreadIfNeeded()
        journalCondition.unlock()
    }

    public func attemptFinished(_ event: AttemptEvent) {}

    /// Journals the send's row (and its dead-token upsert) without waiting:
    /// for paths that cannot suspend. Never waits for a sync.
    public func sendFinished(_ event: SendEvent) {
        if configuration.journalSync == .interval { return appendCompletionToJournal(event) }
        enqueueJournal(.completion(event), continuation: nil)
    }

    /// Journals the send's row and returns once it is durable: appended
    /// (`.interval`, without suspending) or synced (`.always`).
    /// A completion the journal refuses is still queued for the writer,
    /// held in memory (see ``Row/undurable``): the send already went out.
    public func sendFinishedDurably(_ event: SendEvent) async {
        if configuration.journalSync == .interval { return appendCompletionToJournal(event) }
        _ = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            enqueueJournal(.completion(event), continuation: continuation)
        }
    }

    /// Journals the send's intent and returns once it is durable: appended
    /// (`.interval`, without suspending) or synced (`.always`). False, and
    /// nothing written, while the journal cannot take records (a write or
    /// sync failed and no probe has succeeded since) or rows of answered
    /// sends wait in memory only; false too when this write fails.
    public func sendStarting(_ send: SendDescriptor, startedAt: UInt64) async -> Bool {
        if configuration.journalSync == .interval { return appendIntentToJournal(send, startedAt: startedAt) }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            enqueueJournal(.intent(send, startedAt: startedAt), continuation: continuation)
        }
    }

    /// Journals that the send's attempt `attempt` (2, 3, …) is about to
    /// leave and returns once that is durable, as ``sendStarting(_:startedAt:)``
    /// does. The record is the send's intent record again (same key), its
    /// `unknown` row saying `attempt` attempts; recovery keeps the last intent
    /// of a key. Only retries write one: the first attempt is the intent's.
    public func sendRetrying(_ send: SendDescriptor, startedAt: UInt64, attempt: Int) async {
        if configuration.journalSync == .interval { appendIntentToJournal(send, startedAt: startedAt, attempts: attempt); return }
        _ = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            enqueueJournal(.retry(send, startedAt: startedAt, attempt: attempt), continuation: continuation)
        }
    }

    /// Returns once everything handed over so far is durable. At once with
    /// `.interval`: every record was appended before its call returned.
    public func waitUntilDurable() async {
        if configuration.journalSync == .interval { return }
        _ = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            enqueueJournal(.barrier, continuation: continuation)
        }
    }

    private func enqueueJournal(_ entry: JournalEntry, continuation: CheckedContinuation<Bool, Never>?) {
        journalCondition.lock()
        journalPending.append((entry, continuation))
        startJournalThreadIfNeeded()
        journalCondition.signal()
        journalCondition.unlock()
    }

    /// Counters and gauges for metrics and `/readyz`.
    public var statistics: AuditStatistics {
        journalCondition.lock()
        let journalDepth = journalPending.count
        journalCondition.unlock()
        condition.lock()
        defer { condition.unlock() }
        var snapshot = counters
        snapshot.queueDepth = queue.count - queueHead + journalDepth
        snapshot.journalUnsynced = journalUnsynced
        return snapshot
    }

    /// Stops the writer once everything journaled is written or spooled, and
    /// returns when it and the journal thread have exited. Sends that finish later are still
    /// journaled (durably) and reach Postgres from the next start.
    public func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            stopping = true
            // Never started (a relay whose start failed): nothing was taken
            // from the journal, which keeps every record for the next start.
            let neverStarted = !threadsStarted && !finished
            if neverStarted { finished = true }
            if finished {
                condition.unlock()
                if neverStarted {
                    // As the writer's thread does when it exits: a journal thread a send started ends.
                    journalCondition.lock()
                    writerExited = true
                    journalCondition.broadcast()
                    journalCondition.unlock()
                }
                continuation.resume()
                return
            }
            exitContinuations.append(continuation)
            condition.broadcast()
            condition.unlock()
        }
        // Then the journal thread's last trim, so a writer opened next on the
        // same directory never races this one's deletions.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            journalCondition.lock()
            guard journalThreadRunning else {
                journalCondition.unlock()
                continuation.resume()
                return
            }
            journalExitContinuations.append(continuation)
            journalCondition.signal()
            journalCondition.unlock()
        }
    }
}

/// What the audit writer has done so far. Counters only grow.
public struct AuditStatistics: Sendable, Hashable {
    public var written = 0
    public var spooled = 0
    public var replayed = 0
    /// Rows given up: answered sends whose completion no journal holds and
    /// that could be neither written nor spooled before the writer exited
    /// (each logged with its apns-id; a send whose intent was journaled is
    /// still recovered, as outcome `unknown`). Zero on a healthy disk.
    public var dropped = 0
    /// The journal's last write or sync failed and no write or probe has
    /// succeeded since: new sends are refused (503) and `/readyz` fails.
    public var journalFailing = false
    /// Rows (and dead-token upserts) of answered sends held in memory only,
    /// their completion refused by the journal: new sends are refused until
    /// they are written or spooled.
    public var undurableRows = 0
    /// Rows Postgres refused for their data, kept in the quarantine file.
    public var quarantined = 0
    /// Rows recovered from a previous run's journal: sends that finished
    /// (answered) and sends that had started but not finished (`unknown`).
    public var recoveredCompleted = 0
    public var recoveredUnknown = 0
    public var deadTokensUpserted = 0
    /// Records read back from the spool that were torn and skipped.
    public var tornRecords = 0
    public var queueDepth = 0
    public var spoolBytes = 0
    public var connected = false
    /// A database is configured (not spool-only).
    public var databaseConfigured = false
    /// Since when rows have been waiting for Postgres (spooled, or no
    /// connection) while a database is configured; nil when caught up.
    public var behindSince: Date?
    /// When the writer last opened a Postgres connection: with `behindSince`,
    /// tells "Postgres answers but rows do not land" from an outage.
    public var lastConnectedAt: Date?
    /// When Postgres first answered since `behindSince` (a connection opened,
    /// or held when rows fell behind); nil when caught up. What
    /// ``stuckWhileReachable(limit:now:)`` counts from: after an outage
    /// every relay reconnects and replays its spool, and counting from the
    /// outage's start took every one of them out of rotation at once.
    public var reachableSince: Date?
    /// Seconds the last batch write took.
    public var lastWriteSeconds = 0.0
    public var writeBatches = 0
    /// Journal appends, one `write` each: a group of sends (`always`, each
    /// followed by an `fdatasync`) or one record (`interval`).
    public var journalCommits = 0
    /// `fdatasync`s of the journal.
    public var journalSyncs = 0
    /// `interval`: appends not yet taken by a sync of the journal thread.
    public var journalUnsynced = 0
    /// `interval`: times the journal thread looked for appends to sync
    /// (each sync, and each idle wake-up).
    public var journalSyncChecks = 0

    public init() {}

    /// Why new sends are refused, or nil: the journal cannot be written, or
    /// answered sends' rows wait in memory only.
    public var durabilityProblem: String? {
        if journalFailing { return "the audit journal cannot be written (full, read-only or failing disk)" }
        if undurableRows > 0 { return "\(undurableRows) audit rows of answered sends are in memory only (the journal refused them)" }
        return nil
    }

    /// True when rows have been behind for over `limit` seconds although
    /// Postgres accepted a connection meanwhile: the fault is this relay's
    /// (rows refused, schema missing, replay failing), not an outage every
    /// relay shares.
    ///
    /// Counted from when Postgres first answered while rows were behind
    /// (`reachableSince`; from `behindSince` when that is not recorded): a
    /// relay replaying an outage's spool is catching up, and every relay
    /// does so at once.
    public func stuckWhileReachable(limit: Double, now: Date = Date()) -> Bool {
        guard databaseConfigured, let behindSince, let lastConnectedAt, lastConnectedAt >= behindSince else { return false }
        let since = max(behindSince, reachableSince ?? behindSince)
        return now.timeIntervalSince(since) > limit
    }

    /// Seconds the audit has not been reaching Postgres while one is configured (0 when caught up).
    public func behindSeconds(now: Date = Date()) -> Double {
        guard databaseConfigured, let behindSince else { return 0 }
        return max(0, now.timeIntervalSince(behindSince))
    }
}
