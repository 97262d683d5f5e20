import Foundation
import Logging

/// Durability is checked, not assumed: a journal whose disk refuses a write
/// or a sync stops the relay from taking sends (their intents are refused,
/// the ingress answers 503, `/readyz` fails) until a write or the journal
/// thread's probe succeeds again; a finished send whose completion the
/// journal refused keeps its row in memory, and sends stay refused until
/// that row is written or spooled. A row finally given up is counted
/// (`dropped`) and logged with its apns-id.
extension AuditWriter {
    /// A change of the journal's health, logged once per change (not per send).
    enum JournalHealthChange {
        case failed(operation: String, error: String)
        case recovered
    }

    /// Whether an intent may be journaled now: the journal takes records and
    /// no answered send's row waits in memory only. Called with `condition` held.
    var intentsAccepted: Bool { !counters.journalFailing && counters.undurableRows == 0 }

    /// Notes how a journal write (`sync` false) or sync went. Called with
    /// `condition` held; log the change it returns after unlocking.
    func noteJournal(sync: Bool, failure: (any Error)?) -> JournalHealthChange? {
        let wasFailing = counters.journalFailing
        if sync { journalSyncFailed = failure != nil } else { journalWriteFailed = failure != nil }
        counters.journalFailing = journalWriteFailed || journalSyncFailed
        if let failure, !wasFailing { return .failed(operation: sync ? "sync" : "write", error: "\(failure)") }
        if wasFailing, !counters.journalFailing { return .recovered }
        return nil
    }

    func log(_ change: JournalHealthChange?) {
        switch change {
        case .failed(let operation, let error)?:
            logger.critical(
                "audit journal \(operation) failed; new sends are refused (503 Unavailable) and /readyz fails until the journal can be written again",
                metadata: ["error": "\(error)", "spool_directory": "\(configuration.spoolDirectory)"])
        case .recovered?:
            logger.notice("audit journal can be written again; sends are taken again")
        case nil:
            break
        }
    }

    /// The journal thread, now and then: while the journal is failing, tries
    /// a small write and `fdatasync` in the spool directory. With no sends
    /// (a relay out of rotation gets none) nothing else would find out that
    /// the disk has room again.
    func probeJournalIfFailing() {
        condition.lock()
        let failing = counters.journalFailing
        condition.unlock()
        guard failing else { return }
        do {
            try SegmentFile.probe(journal.directory.appendingPathComponent(".journal-probe").path)
        } catch {
            return
        }
        condition.lock()
        journalWriteFailed = false
        journalSyncFailed = false
        counters.journalFailing = false
        condition.unlock()
        log(.recovered)
    }

    /// Gives up rows held in memory only (their completion in no journal)
    /// that could be neither written nor spooled: counts the audit rows as
    /// dropped and logs each with its apns-id, so the dropped-rows alert
    /// fires. A row whose intent the journal holds is still recovered at the
    /// next start, as outcome `unknown`: the log says so.
    func giveUp(_ rows: some Collection<Row>) {
        guard !rows.isEmpty else { return }
        var dropped = 0
        for row in rows {
            guard row.kind != .deadToken else { continue }
            dropped += 1
            let apnsID = configuration.rowLayout.field("apns_id", of: row.line, in: row.format) ?? ""
            logger.critical(
                "audit row given up: the journal refused it and it could be neither written to Postgres nor spooled",
                metadata: [
                    "apns_id": "\(apnsID)",
                    "recovered_as": "\(row.journalSegment == nil ? "nothing" : "outcome unknown, from its intent in the journal")",
                ])
        }
        condition.lock()
        counters.dropped += dropped
        counters.undurableRows -= rows.count
        condition.unlock()
    }
}
