import Foundation
public import Logging
public import Relay

/// Turns every finished send into one `apns_audit` row, off the send path.
///
/// `sendFinished` only appends to a bounded in-memory queue. One thread owns
/// a blocking libpq connection and drains the queue in batches with COPY
/// (flushing at `batchSize` rows or every `flushInterval`). When Postgres is
/// unreachable, or the queue passes its high-water mark, batches go to the
/// disk spool instead; they are replayed, oldest first and idempotently,
/// as soon as Postgres answers again. Shutdown writes or spools everything
/// still queued. Rows are only lost when the queue is full (counted as
/// dropped, which pages).
public final class AuditWriter: RelayObserver, @unchecked Sendable {
    // Shared state is guarded by `condition`; the connection and the spool
    // are used only by the writer thread.

    /// Settings of the writer.
    public struct Configuration: Sendable {
        /// A libpq connection string or URL; empty uses the PG* variables.
        public var conninfo: String
        /// No database: rows stay in the spool for a later relay to replay.
        public var spoolOnly = false
        /// Directory for spool segments (created if missing).
        public var spoolDirectory: String
        /// Written to every row's `relay_instance`.
        public var relayInstance: String
        public var batchSize = 500
        /// Longest a row waits in the queue before a partial batch is flushed, seconds.
        public var flushInterval = 0.05
        /// Rows queued at most; beyond it rows are dropped and counted.
        public var queueCapacity = 200_000
        /// Past this depth batches go straight to the spool to catch up.
        public var highWaterMark = 50_000
        public var reconnectMinimumDelay = 0.2
        public var reconnectMaximumDelay = 10.0
        /// Daily partitions kept ready ahead of today.
        public var partitionDaysAhead = 7
        /// Drop partitions older than this many days (nil keeps everything).
        public var retentionDays: Int?

        public init(conninfo: String, spoolDirectory: String, relayInstance: String) {
            self.conninfo = conninfo
            self.spoolDirectory = spoolDirectory
            self.relayInstance = relayInstance
        }
    }

    enum Item {
        case audit(AuditRecord)
        case deadToken(DeadTokenRecord)
    }

    public let configuration: Configuration
    let logger: Logger
    let condition = NSCondition()
    var queue: [Item] = []
    var queueHead = 0
    var stopping = false
    var finished = false
    var counters = AuditStatistics()
    var exitContinuations: [CheckedContinuation<Void, Never>] = []

    let spool: AuditSpool
    var connection: PostgresConnection?
    var nextConnectAttempt = Date.distantPast
    var reconnectDelay: Double
    var lastMaintenance = Date.distantPast

    /// Opens the spool (replaying anything a previous run left happens on the
    /// writer thread) and starts the writer thread.
    public init(configuration: Configuration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.spool = try AuditSpool(directory: configuration.spoolDirectory)
        self.reconnectDelay = configuration.reconnectMinimumDelay
        counters.spoolBytes = spool.totalBytes()
        let thread = Thread { [self] in run() }
        thread.name = "apns-relay-audit"
        thread.start()
    }

    public func attemptFinished(_ event: AttemptEvent) {}

    /// Queues the send's row (and its dead-token upsert). Never blocks on I/O.
    public func sendFinished(_ event: SendEvent) {
        var items = [Item.audit(AuditRecord(event: event, relayInstance: configuration.relayInstance))]
        if let dead = DeadTokenRecord(event: event) { items.append(.deadToken(dead)) }
        condition.lock()
        defer { condition.unlock() }
        guard !stopping, queue.count - queueHead + items.count <= configuration.queueCapacity else {
            counters.dropped += 1
            return
        }
        queue.append(contentsOf: items)
        if queue.count - queueHead >= configuration.batchSize { condition.signal() }
    }

    /// Counters and gauges for metrics and `/readyz`.
    public var statistics: AuditStatistics {
        condition.lock()
        defer { condition.unlock() }
        var snapshot = counters
        snapshot.queueDepth = queue.count - queueHead
        return snapshot
    }

    /// Stops intake, writes or spools everything queued, and returns once the
    /// writer thread has exited.
    public func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            stopping = true
            if finished {
                condition.unlock()
                continuation.resume()
                return
            }
            exitContinuations.append(continuation)
            condition.signal()
            condition.unlock()
        }
    }
}

/// What the audit writer has done so far. Counters only grow.
public struct AuditStatistics: Sendable, Hashable {
    public var written = 0
    public var spooled = 0
    public var replayed = 0
    public var dropped = 0
    public var deadTokensUpserted = 0
    /// Records read back from the spool that were torn and skipped.
    public var tornRecords = 0
    public var queueDepth = 0
    public var spoolBytes = 0
    public var connected = false
    /// Seconds the last batch write took.
    public var lastWriteSeconds = 0.0
    public var writeBatches = 0

    public init() {}
}
