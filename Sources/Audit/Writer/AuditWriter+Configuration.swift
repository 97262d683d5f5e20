import Foundation

extension AuditWriter {
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
        /// Seconds the writer waits on Postgres for a connect or one
        /// statement (`audit.postgres_timeout_ms`); past it the connection
        /// is closed and the batch spooled, as in an outage.
        public var postgresTimeout = 10.0
        /// `.interval`: how long an idle journal thread waits before it
        /// looks again (and trims settled segments); tests shorten it.
        var journalIdleWake = 1.0
        /// Called on the journal thread just before each write and
        /// `fdatasync` (`.interval`: of the stage; `.always`: of a group); a
        /// test blocks it to play a disk whose sync hangs.
        var journalSyncWillStart: (@Sendable () -> Void)?
        /// `.always`: seconds a group's sync may take before new sends are
        /// refused (``AuditWriter/journalStallLimit``); tests shorten it.
        var journalStallLimit = AuditWriter.journalStallLimit
        /// The row's columns (tests describe a later layout with it).
        var rowLayout = AuditRowLayout.standard

        public init(conninfo: String, spoolDirectory: String, relayInstance: String) {
            self.conninfo = conninfo
            self.spoolDirectory = spoolDirectory
            self.relayInstance = relayInstance
        }
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
}
