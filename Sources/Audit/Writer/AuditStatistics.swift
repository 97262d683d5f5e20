public import Foundation
import RelayBasics

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
    /// When the live write now in progress began; nil between writes.
    public var writingSince: Date?
    /// Connects and statements Postgres did not answer within
    /// `audit.postgres_timeout_ms` (each closed its connection).
    public var postgresTimeouts = 0
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
    /// When the oldest journal record not yet `fdatasync`ed was written
    /// (``MonotonicClock``), among those a sync is working on now
    /// (`journalSyncingSince`) and those appended since (`journalUnsyncedSince`);
    /// nil when every record is synced. See ``journalUnsyncedSeconds(now:)``.
    public var journalSyncingSince: UInt64?
    public var journalUnsyncedSince: UInt64?
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
    /// (`reachableSince`): a relay replaying an outage's spool is catching
    /// up, and every relay does so at once. A connect or statement Postgres
    /// did not answer in time (a locked table, a frozen server) clears it:
    /// that fault is every relay's, and counting starts again at the next
    /// connection, so the shared stall never takes every relay out of
    /// rotation at once.
    public func stuckWhileReachable(limit: Double, now: Date = Date()) -> Bool {
        guard databaseConfigured, let behindSince, let reachableSince, let lastConnectedAt, lastConnectedAt >= behindSince else {
            return false
        }
        return now.timeIntervalSince(max(behindSince, reachableSince)) > limit
    }

    /// Seconds the oldest journal record has waited for its `fdatasync` (0
    /// when all are synced). A few sync intervals at most on a healthy disk;
    /// it grows while a sync does not return (a stalled or failing block
    /// device, a hung network volume): records are then in the page cache
    /// only, which a crash of the machine loses, and with `always` the
    /// sends wait. 0 while the journal is failing (a full or read-only disk):
    /// that has its own signal (``journalFailing``, the refused sends), and a
    /// second page for the same disk would be noise.
    public func journalUnsyncedSeconds() -> Double { journalUnsyncedSeconds(now: MonotonicClock.now()) }

    /// ``journalUnsyncedSeconds()`` at `now` (``MonotonicClock``'s nanoseconds).
    public func journalUnsyncedSeconds(now: UInt64) -> Double {
        guard !journalFailing, let since = [journalSyncingSince, journalUnsyncedSince].compactMap({ $0 }).min(), now > since else { return 0 }
        return Double(now - since) / 1e9
    }

    /// Seconds the audit has not been reaching Postgres while one is
    /// configured (0 when caught up): since rows fell behind, or since the
    /// write in progress began, whichever is earlier.
    public func behindSeconds(now: Date = Date()) -> Double {
        guard databaseConfigured, let since = [behindSince, writingSince].compactMap({ $0 }).min() else { return 0 }
        return max(0, now.timeIntervalSince(since))
    }
}
