import Audit
import Foundation
import Logging
import RelayBasics
import Telemetry

/// What the relay's readiness and metrics read from the audit writer, and
/// the migrations applied at start.
extension RelayServer {
    /// Why the audit keeps this relay out of rotation, or nil. Readiness as a
    /// whole (draining first) is ``Ingress/notReadyReason``, served by both
    /// listeners' `/readyz`.
    static func auditNotReadyReason(
        _ statistics: AuditStatistics, spoolDirectory: String, spoolWritable: Bool, behindLimit: Double, now: Date,
        monotonicNow: UInt64 = MonotonicClock.now()
    ) -> String? {
        guard statistics.connected || spoolWritable else {
            return "the audit log can be written neither to Postgres nor to the spool (\(spoolDirectory))"
        }
        // Sends are refused (503) meanwhile: a relay that cannot make its
        // sends durable takes none, and leaves rotation so others take them.
        if let problem = statistics.durabilityProblem {
            return "\(problem) (\(spoolDirectory)); sends are refused until it can"
        }
        // The spool disk takes writes but its sync does not return (a stalled
        // device, a hung network volume): answered sends' records are in the
        // page cache only. Sends are still taken (a crash of the process
        // loses nothing), but the relay leaves rotation and the alert pages.
        let unsynced = statistics.journalUnsyncedSeconds(now: monotonicNow)
        if unsynced > journalStallLimit {
            return "the audit journal has not been synced to disk for \(Int(unsynced)) s (\(spoolDirectory)): the disk's fdatasync does not return"
        }
        // Rows are safe on disk either way. When Postgres answers and this
        // relay's rows still do not land, the fault is local: take it out
        // of rotation. A Postgres outage does not fail readiness (every
        // relay would leave rotation and sends would stop); the alert
        // APNsRelayAuditBehind pages for both.
        if statistics.stuckWhileReachable(limit: behindLimit, now: now) {
            return "the audit has not reached Postgres for \(Int(statistics.behindSeconds(now: now))) s although Postgres answers (rows wait in the spool; see the writer's log)"
        }
        return nil
    }

    /// Seconds a journal record may wait for its `fdatasync` before the
    /// relay leaves rotation (``AuditWriter/journalStallLimit``).
    static let journalStallLimit = AuditWriter.journalStallLimit

    static func auditSnapshot(_ statistics: AuditStatistics) -> AuditSnapshot {
        var snapshot = AuditSnapshot(
            queueDepth: statistics.queueDepth, spoolBytes: statistics.spoolBytes, connected: statistics.connected,
            written: statistics.written, spooled: statistics.spooled, replayed: statistics.replayed, dropped: statistics.dropped)
        snapshot.quarantined = statistics.quarantined
        snapshot.behindSeconds = statistics.behindSeconds()
        snapshot.postgresTimeouts = statistics.postgresTimeouts
        snapshot.journalUnsyncedSeconds = statistics.journalUnsyncedSeconds()
        return snapshot
    }

    /// Applies the migrations off the cooperative pool; a failure is logged
    /// and the relay starts anyway (rows wait in the spool until the database
    /// is back and migrated). Each connect and statement waits at most
    /// `bound` (`audit.postgres_timeout_ms`), so a Postgres that does
    /// not answer cannot hold the start; a migration longer than that is
    /// for `apns-relay migrate`, which waits as long as it takes.
    static func migrate(conninfo: String, bound: PostgresWaitBound, logger: Logger) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                do {
                    let report = try Migrator().apply(conninfo: conninfo, logger: logger, bound: bound)
                    logger.info("audit schema migrated", metadata: ["applied": "\(report.applied.joined(separator: ","))", "already": "\(report.alreadyApplied.count)"])
                } catch {
                    logger.error("audit migrations could not be applied at start-up; rows are spooled until Postgres is back and migrated (apns-relay migrate applies them without a time bound)", metadata: ["error": "\(error)"])
                }
                continuation.resume()
            }
        }
    }
}
