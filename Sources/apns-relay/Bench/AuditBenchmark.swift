import APNs
import Audit
import Foundation
import Logging
import Relay
import RelayBasics

/// Rows/s through the audit writer against `psql \copy` of the same rows into the same table.
struct AuditBenchmark {
    let rows: Int
    let conninfo: String
    let batchSize: Int

    func run() async throws -> String {
        _ = try Migrator().apply(conninfo: conninfo)
        let events = (0..<rows).map(Self.event)
        let directory = NSTemporaryDirectory() + "apns-relay-audit-bench-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try psql("TRUNCATE apns_audit; SELECT apns_audit_ensure_partitions(current_date - 1, 3);")

        // The writer: from the first event queued to every row committed.
        var configuration = AuditWriter.Configuration(conninfo: conninfo, spoolDirectory: directory + "/spool", relayInstance: "bench")
        configuration.highWaterMark = rows + 1
        configuration.batchSize = batchSize
        let writer = try AuditWriter(configuration: configuration, logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() })
        let clock = ContinuousClock()
        let writerStart = clock.now
        events.forEach(writer.sendFinished)
        let queuedSeconds = (clock.now - writerStart).seconds
        await writer.shutdown()
        let writerSeconds = (clock.now - writerStart).seconds
        let statistics = writer.statistics
        guard statistics.written == rows else { throw BenchmarkError(description: "writer wrote \(statistics.written) of \(rows) rows (spooled \(statistics.spooled))") }

        // The reference: psql's \copy of the very same COPY lines.
        try psql("TRUNCATE apns_audit;")
        let file = directory + "/rows.copy"
        var data = Data()
        for event in events { data.append(contentsOf: AuditRecord(event: event, relayInstance: "bench").copyLine()) }
        try data.write(to: URL(fileURLWithPath: file))
        let psqlStart = clock.now
        try psql("\\copy apns_audit (\(AuditRecord.columns.joined(separator: ", "))) FROM '\(file)'")
        let psqlSeconds = (clock.now - psqlStart).seconds
        let copied = try psql("SELECT count(*) FROM apns_audit;").trimmingCharacters(in: .whitespacesAndNewlines)
        guard copied == String(rows) else { throw BenchmarkError(description: "psql copied \(copied) rows") }
        try psql("TRUNCATE apns_audit;")

        let writerRate = Double(rows) / writerSeconds
        let psqlRate = Double(rows) / psqlSeconds
        return [
            "audit benchmark: \(rows) rows into apns_audit (\(statistics.writeBatches) writer batches of up to \(batchSize))",
            String(format: "  audit writer: %.0f rows/s (%.2f s, of which %.2f s building and queuing rows on the caller)", writerRate, writerSeconds, queuedSeconds),
            String(format: "  psql \\copy:   %.0f rows/s (%.2f s)", psqlRate, psqlSeconds),
            String(format: "  ratio (writer / psql): %.2f", writerRate / psqlRate),
        ].joined(separator: "\n")
    }

    private func psql(_ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", conninfo, "-c", sql]
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
