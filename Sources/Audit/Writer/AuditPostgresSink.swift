import APNs
import Foundation
import Logging
import RelayBasics

/// Where the audit writer's rows land: a blocking libpq connection, used by
/// the writer thread alone. It connects (and reconnects, backing off),
/// keeps the daily partitions ready, writes rows with COPY (live, or
/// through a temporary table for replay), and quarantines a row Postgres
/// refuses for its data, found by splitting its batch
/// (``write(_:replay:settled:)``, the one place that does so).
final class AuditPostgresSink {
    typealias Row = AuditWriter.Row

    /// What became of rows handed to ``write(_:replay:settled:)``.
    enum Settlement {
        /// Written in one transaction.
        case written(ArraySlice<Row>)
        /// Refused for its data, kept in the quarantine file.
        case quarantined(Row)
        /// Refused for its data, and the quarantine file could not take it:
        /// the caller keeps it, and its replay will meet the same refusal.
        case unquarantined(Row)
    }

    let configuration: AuditWriter.Configuration
    private let logger: Logger
    private let quarantine: AuditQuarantine
    private var connection: PostgresConnection?
    // Pacing in ``MonotonicClock/now()``'s nanoseconds: a step of the wall
    // clock must not stall or hurry it.
    /// Not before this does the sink try to connect again.
    private var nextConnectAttempt: UInt64 = 0
    private var reconnectDelay: Double
    /// When partitions were last maintained (nil: not yet on this connection).
    private var lastMaintenance: UInt64?
    /// How long each connect and statement may wait, and the drain's cutoff.
    let bound: PostgresWaitBound
    /// Told when a connection opens or is dropped, and when Postgres did not answer.
    private let connectionChanged: (ConnectionChange) -> Void

    /// What ``init(configuration:logger:cutoff:connectionChanged:)``'s observer is told.
    enum ConnectionChange {
        case opened
        case dropped
        /// A connect or statement passed its bound (``PostgresError/notAnswered``):
        /// Postgres did not answer, which every relay on it sees alike.
        case unanswered
    }

    init(
        configuration: AuditWriter.Configuration, logger: Logger, cutoff: PostgresCutoff,
        connectionChanged: @escaping (ConnectionChange) -> Void
    ) throws {
        self.configuration = configuration
        self.logger = logger
        self.quarantine = try AuditQuarantine(directory: configuration.spoolDirectory + "/quarantine")
        self.reconnectDelay = configuration.reconnectMinimumDelay
        self.bound = PostgresWaitBound(seconds: configuration.postgresTimeout, cutoff: cutoff)
        self.connectionChanged = connectionChanged
    }

    /// The drain's cutoff has passed: no new work goes to Postgres, rows go to the spool.
    var pastCutoff: Bool { bound.cutoff?.hasPassed ?? false }

    var isConnected: Bool { connection != nil }

    /// Connects unless connected or not yet due. With no database configured
    /// it never does: every row stays in the spool until a relay with a
    /// database replays it.
    func connectIfDue() {
        guard connection == nil, MonotonicClock.now() >= nextConnectAttempt, !configuration.spoolOnly, !pastCutoff else { return }
        do {
            let connection = try PostgresConnection(conninfo: configuration.conninfo, logger: logger, bound: bound)
            try connection.execute("SET application_name = 'apns-relay audit writer'")
            self.connection = connection
            reconnectDelay = configuration.reconnectMinimumDelay
            lastMaintenance = nil
            connectionChanged(.opened)
            logger.info("audit writer connected to Postgres")
        } catch {
            if error.notAnswered { connectionChanged(.unanswered) }
            nextConnectAttempt = MonotonicClock.now() + MonotonicClock.nanoseconds(reconnectDelay * Double.random(in: 0.8...1.2))
            reconnectDelay = min(reconnectDelay * 2, configuration.reconnectMaximumDelay)
            logger.warning("audit writer cannot reach Postgres; spooling to disk", metadata: ["error": "\(error)"])
        }
    }

    /// Tries to connect at once, whatever the backoff said: one last try
    /// before the writer exits with rows in the spool.
    func connectNow() {
        if connection == nil { nextConnectAttempt = 0 }
        connectIfDue()
    }

    func disconnect() {
        connection = nil
    }

    /// Drops the connection after a failure: rows spool until the next
    /// attempt, after the backoff, succeeds.
    func dropConnection(after error: any Error) {
        connection = nil
        nextConnectAttempt = MonotonicClock.now() + MonotonicClock.nanoseconds(reconnectDelay)
        connectionChanged(.dropped)
        if (error as? PostgresError)?.notAnswered == true { connectionChanged(.unanswered) }
        logger.warning("audit write failed; spooling to disk until Postgres answers", metadata: ["error": "\(error)"])
    }

    /// Writes `rows` (`replay`: idempotently, through a temporary table). A
    /// batch Postgres refuses for its data is split until each refusal is
    /// one row, which is quarantined; every other row is written. Reports
    /// each part through `settled` and returns the rows left unwritten when
    /// the connection failed (it is then dropped), or all of them without one.
    func write(_ rows: ArraySlice<Row>, replay: Bool, settled: (Settlement) -> Void) -> [Row] {
        guard let connection else { return Array(rows) }
        if pastCutoff {
            dropConnection(after: PostgresError(message: "the drain's end for Postgres has passed", sqlState: nil))
            return Array(rows)
        }
        let outcome = Self.bisect(
            rows,
            insert: { slice in
                do {
                    try insert(slice, replay: replay, on: connection)
                } catch {
                    connection.rollbackIfNeeded()
                    throw error
                }
            },
            refusedForData: { error in
                (error as? PostgresError).flatMap { $0.isDataError && connection.isHealthy ? $0 : nil }
            },
            written: { settled(.written($0)) },
            refused: { row, error in settled(quarantine(row, error: error) ? .quarantined(row) : .unquarantined(row)) })
        if let failure = outcome.failure { dropConnection(after: failure) }
        return outcome.unwritten
    }

    /// Writes a previous run's journal straight to Postgres (its spool had
    /// no room), idempotently as replay does: all or nothing.
    func writeRecovered(_ rows: [Row]) throws {
        guard let connection else { throw PostgresError(message: "no connection to Postgres", sqlState: nil) }
        do {
            try insert(rows[...], replay: true, on: connection)
        } catch {
            connection.rollbackIfNeeded()
            dropConnection(after: error)
            throw error
        }
    }

    /// The split: inserts `rows`; a part refused for its data
    /// (`refusedForData` gives the error) is split in two, first half
    /// first, down to single rows, which go to `refused`. Any other failure
    /// stops it: the rows not yet written are returned with it.
    static func bisect<Element>(
        _ rows: ArraySlice<Element>,
        insert: (ArraySlice<Element>) throws -> Void,
        refusedForData: (any Error) -> PostgresError?,
        written: (ArraySlice<Element>) -> Void,
        refused: (Element, PostgresError) -> Void
    ) -> (unwritten: [Element], failure: (any Error)?) {
        var pending: [ArraySlice<Element>] = [rows]
        while let part = pending.first {
            pending.removeFirst()
            do {
                try insert(part)
                written(part)
            } catch {
                guard let dataError = refusedForData(error) else { return (Array(part) + pending.flatMap { $0 }, error) }
                if part.count == 1 {
                    refused(part.first!, dataError)
                } else {
                    let middle = part.startIndex + part.count / 2
                    pending.insert(contentsOf: [part[..<middle], part[middle...]], at: 0)
                }
            }
        }
        return ([], nil)
    }

    /// Keeps a row Postgres refused for its data on disk, logged (apns-id
    /// only: a dead-token row holds a token). False when the quarantine
    /// file could not take it either.
    private func quarantine(_ row: Row, error: PostgresError) -> Bool {
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
            logger.critical("audit quarantine write failed", metadata: ["error": "\(error)"])
            return false
        }
        logger.error("audit row refused by Postgres for its data; quarantined, the rest of its batch written", metadata: [
            "sqlstate": "\(error.sqlState ?? "")", "error": "\(error.message)",
            "apns_id": "\(apnsID ?? "")",
            "kind": "\(row.kind == .audit ? "audit" : "dead_token")",
        ])
        return true
    }

    /// Keeps daily partitions ready ahead of time and applies retention, hourly.
    func maintainPartitionsIfDue() {
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
            // Given up after Postgres did not answer: rows spool meanwhile.
            if !connection.isHealthy { dropConnection(after: error) }
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
