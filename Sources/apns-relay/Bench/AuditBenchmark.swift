import APNs
import Audit
import Foundation
import Logging
import Relay
import RelayBasics

/// Rows/s through the audit writer against `psql \copy` of the same rows into the same table.
///
/// The comparison is kept fair on both sides:
///
/// - **Same rows**: the writer and psql load the very same COPY lines
///   (same ids, same bytes), encoded before either clock starts, as psql's
///   file is.
/// - **Same table**: `apns_audit` with all its indexes and partitions,
///   truncated and checkpointed before each load, so no run pays for the
///   previous one's dirty pages or a checkpoint it triggered.
/// - **Same transaction size**: the writer commits one COPY per batch;
///   psql loads the same lines cut into files of the same batch size, one
///   `\copy` (one transaction) each, in one session. psql's one COPY of every
///   row (one transaction) is printed too, as a second reference.
///
/// The writer's figure is its path to Postgres (rows handed over as the
/// journal hands them, to the last batch committed). The path through the
/// journal (encoding each row from its send event and appending it to the
/// journal before the writer sees it), which psql has no counterpart for, is
/// printed as a figure of its own.
struct AuditBenchmark {
    let rows: Int
    let conninfo: String
    let batchSize: Int

    func run() async throws -> String {
        _ = try Migrator().apply(conninfo: conninfo)
        let events = (0..<rows).map(Self.event)
        let lines = events.map { AuditRecord(event: $0, relayInstance: "bench").copyLine() }
        let directory = NSTemporaryDirectory() + "apns-relay-audit-bench-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try psql("SELECT apns_audit_ensure_partitions(current_date - 1, 3);")
        let columns = AuditRecord.columns.joined(separator: ", ")

        // psql's input, written before any clock: the whole file, and the same lines in batch-sized files.
        let whole = directory + "/rows.copy"
        try Data(lines.joined()).write(to: URL(fileURLWithPath: whole))
        var script = ""
        for (number, start) in stride(from: 0, to: lines.count, by: batchSize).enumerated() {
            let file = directory + "/batch-\(number).copy"
            try Data(lines[start..<min(start + batchSize, lines.count)].joined()).write(to: URL(fileURLWithPath: file))
            script += "\\copy apns_audit (\(columns)) FROM '\(file)'\n"
        }
        let batchScript = directory + "/batches.sql"
        try script.write(toFile: batchScript, atomically: true, encoding: .utf8)

        // A warm-up load, so the first measured one does not pay for cold caches.
        try prepareTable()
        try psql("\\copy apns_audit (\(columns)) FROM '\(directory)/batch-0.copy'")

        // The writer's path to Postgres: the encoded rows handed to its thread, to every row committed.
        try prepareTable()
        let writer = try AuditWriter.started(configuration: writerConfiguration(directory + "/spool-direct"), logger: Self.quiet)
        let clock = ContinuousClock()
        let directStart = clock.now
        writer.enqueueEncodedRowsForBenchmark(lines)
        await writer.shutdown()
        let directSeconds = (clock.now - directStart).seconds
        let direct = writer.statistics
        try expectRows(written: direct, what: "the writer")

        // psql: the same lines, one \copy per batch-sized file (one transaction each), one session.
        try prepareTable()
        let batchesStart = clock.now
        _ = try psql(file: batchScript)
        let batchesSeconds = (clock.now - batchesStart).seconds
        try expectRows(written: nil, what: "psql, in batches")

        // psql: the whole file in one COPY (one transaction).
        try prepareTable()
        let wholeStart = clock.now
        try psql("\\copy apns_audit (\(columns)) FROM '\(whole)'")
        let wholeSeconds = (clock.now - wholeStart).seconds
        try expectRows(written: nil, what: "psql, one COPY")

        // The writer through the journal: from the first finished send handed over to every row committed.
        try prepareTable()
        let journaled = try AuditWriter.started(configuration: writerConfiguration(directory + "/spool-journal"), logger: Self.quiet)
        let journalStart = clock.now
        events.forEach(journaled.sendFinished)
        let queuedSeconds = (clock.now - journalStart).seconds
        await journaled.shutdown()
        let journalSeconds = (clock.now - journalStart).seconds
        try expectRows(written: journaled.statistics, what: "the writer through the journal")
        try psql("TRUNCATE apns_audit;")

        let rate = { (seconds: Double) in Double(rows) / seconds }
        return [
            "audit benchmark: \(rows) rows into apns_audit, batches of \(batchSize) (\(direct.writeBatches) writer batches)",
            String(format: "  audit writer: %.0f rows/s (%.2f s; the rows handed over encoded, as the journal hands them)", rate(directSeconds), directSeconds),
            String(format: "  psql \\copy:   %.0f rows/s (%.2f s; the same lines, one \\copy of %d rows per transaction)", rate(batchesSeconds), batchesSeconds, batchSize),
            String(format: "  ratio (writer / psql): %.2f", batchesSeconds / directSeconds),
            String(format: "  psql \\copy, one COPY of every row: %.0f rows/s (%.2f s); writer / that: %.2f", rate(wholeSeconds), wholeSeconds, wholeSeconds / directSeconds),
            String(
                format: "  audit writer through the journal: %.0f rows/s (%.2f s, of which %.2f s handing sends over; each row encoded from its send and journaled first); / psql: %.2f",
                rate(journalSeconds), journalSeconds, queuedSeconds, batchesSeconds / journalSeconds),
        ].joined(separator: "\n")
    }

    private static var quiet: Logger { Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() } }

    private func writerConfiguration(_ spool: String) -> AuditWriter.Configuration {
        var configuration = AuditWriter.Configuration(conninfo: conninfo, spoolDirectory: spool, relayInstance: "bench")
        // Every row to Postgres: none diverted to the spool to catch up.
        configuration.highWaterMark = rows + 1
        configuration.batchSize = batchSize
        return configuration
    }

    /// An empty table and no dirty pages: each load starts from the same state.
    private func prepareTable() throws {
        try psql("TRUNCATE apns_audit;")
        // CHECKPOINT needs a superuser (or pg_checkpoint): without one, the loads just start less level.
        _ = try? psql("CHECKPOINT;")
    }

    private func expectRows(written statistics: AuditStatistics?, what: String) throws {
        if let statistics, statistics.written != rows {
            throw BenchmarkError(description: "\(what) wrote \(statistics.written) of \(rows) rows (spooled \(statistics.spooled))")
        }
        let count = try psql("SELECT count(*) FROM apns_audit;").trimmingCharacters(in: .whitespacesAndNewlines)
        guard count == String(rows) else { throw BenchmarkError(description: "\(what): \(count) rows in apns_audit, not \(rows)") }
    }

    @discardableResult
    private func psql(_ sql: String) throws -> String { try psql(["-c", sql]) }

    private func psql(file: String) throws -> String { try psql(["-f", file]) }

    private func psql(_ input: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", conninfo] + input
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchmarkError(description: "psql failed: \(output)") }
        return output
    }

    static func event(_ index: Int) -> SendEvent {
        let finished = UnixTime.nowNanoseconds() + UInt64(index) * 1000
        let token = String(format: "%064x", index)
        return SendEvent(
            send: SendDescriptor(
                app: "bench", environment: .production, operation: .alert, apnsID: APNsID.random(), pushType: .alert,
                priority: .immediate, topic: "com.example.bench", tokenFingerprint: Fingerprint.of(token), snapshotID: "s-\(index)",
                payloadBytes: 120, caller: "bench", traceID: String(format: "%032x", index)),
            outcome: .success, status: 200, reason: nil, errorType: nil, attempts: 1, trapHits: [], latencySeconds: 0.004,
            startedAt: finished - 4_000_000, finishedAt: finished, apnsUniqueID: nil, unregisteredAt: nil, dropsToken: false,
            attemptLog: [AttemptSummary(status: 200, reason: nil, durationSeconds: 0.004)], deadToken: nil)
    }
}
