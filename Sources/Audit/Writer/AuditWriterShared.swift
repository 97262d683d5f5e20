import Logging
import RelayBasics

/// The one lock of the audit writer and what it guards: the
/// ``AuditWriterState`` the sending threads, the journal and the writer
/// thread share, and who waits for the writer thread to exit.
///
/// Its timed waits are monotonic. Lock order: `condition` before the
/// journal's own (``AuditJournal``), never the other way round.
final class AuditWriterShared: @unchecked Sendable {
    let condition = MonotonicCondition()
    var state = AuditWriterState()
    /// ``AuditWriter/shutdown()`` callers waiting for the writer thread's exit.
    var exitContinuations: [CheckedContinuation<Void, Never>] = []
    /// Past it the writer gives Postgres no more work (``AuditWriter/shutdown(postgresWithin:)``).
    let postgresCutoff = PostgresCutoff()

    /// Runs `body` on the state under the lock.
    @inline(__always)
    func withState<Result>(_ body: (inout AuditWriterState) throws -> Result) rethrows -> Result {
        condition.lock()
        defer { condition.unlock() }
        return try body(&state)
    }

    /// Logs a change of the journal's health (outside the lock).
    func log(_ change: AuditWriterState.JournalHealthChange?, logger: Logger, spoolDirectory: String) {
        switch change {
        case .failed(let operation, let error)?:
            logger.critical(
                "audit journal \(operation) failed; new sends are refused (503 Unavailable) and /readyz fails until the journal can be written again",
                metadata: ["error": "\(error)", "spool_directory": "\(spoolDirectory)"])
        case .recovered?:
            logger.notice("audit journal can be written again; sends are taken again")
        case nil:
            break
        }
    }

    /// Gives up rows held in memory only (their completion in no journal)
    /// that could be neither written nor spooled: counts the audit rows as
    /// dropped and logs each with its apns-id, so the dropped-rows alert
    /// fires. A row whose intent the journal holds is still recovered at the
    /// next start, as outcome `unknown`: the log says so.
    func giveUp(_ rows: some Collection<AuditWriter.Row>, layout: AuditRowLayout, logger: Logger) {
        guard !rows.isEmpty else { return }
        for row in rows where row.kind != .deadToken {
            let apnsID = row.apnsID(layout: layout)
            logger.critical(
                "audit row given up: the journal refused it and it could be neither written to Postgres nor spooled",
                metadata: [
                    "apns_id": "\(apnsID)",
                    "recovered_as": "\(row.journalSegment == nil ? "nothing" : "outcome unknown, from its intent in the journal")",
                ])
        }
        withState { $0.noteGivenUp(rows) }
    }
}
