@testable import Audit
import Foundation
import Testing
import TestSupport

/// When the writer thread takes rows: a full batch at once, a partial one
/// only `flushInterval` after its previous take. Verdicts are the writer's
/// counters and Postgres' lock table, never how long anything took.
@Suite("Audit writer: batching under a steady flow")
struct AuditWriterBatchingTests {
    /// A writer into `database` taking `batchSize` rows at most, a partial batch `flushInterval` after the last.
    static func writer(into database: TestDatabase, batchSize: Int, flushInterval: Double) throws -> AuditWriter {
        var configuration = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "batching")
        configuration.batchSize = batchSize
        configuration.flushInterval = flushInterval
        // The tests hold the table to keep a COPY waiting: longer than the
        // writer's bound on a loaded machine, so the bound must not end it.
        configuration.postgresTimeout = 600
        return try AuditWriter.started(configuration: configuration, logger: quietLogger())
    }

    @Test("rows queued during a COPY wait for a full batch instead of going out as a small COPY of their own")
    func partialBatchWaitsForTheFlushInterval() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }

        // Holding the table makes the writer's first COPY wait, so rows can be queued while it runs.
        let holder = try database.connect()
        try holder.execute("BEGIN")
        try holder.execute("LOCK TABLE apns_audit IN SHARE MODE")
        // The interval far longer than the test: only a full batch (or shutdown) makes the writer take rows.
        let writer = try Self.writer(into: database, batchSize: 5, flushInterval: 600)
        let events = (0..<10).map { EventFactory.event($0) }
        // The first five reach the queue together (one journal append, as a
        // batch's chunk does): handed over one by one, a writer thread that
        // first looked at its queue between two of them took the few there
        // at once (its previous take is long past), and the test then saw
        // COPYs of 2 and 3 rows, not the full batch it holds.
        await writer.sendsFinishedDurably(Array(events[0..<5]))
        let blocked = await eventually(60) {
            (try? database.scalar("""
                SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                AND application_name = 'apns-relay audit writer' AND wait_event_type = 'Lock'
                """)) == "1"
        }
        #expect(blocked, "the writer took the first full batch and waits for the table")

        events[5..<9].forEach(writer.sendFinished)
        try holder.execute("COMMIT")
        #expect(await eventually(60) { writer.statistics.written == 5 })
        // Four rows are queued: taken at once, they would be a COPY of their own.
        #expect(writer.statistics.writeBatches == 1)
        writer.sendFinished(events[9])
        #expect(await eventually(60) { writer.statistics.written == 10 })
        #expect(writer.statistics.writeBatches == 2, "the four queued rows and the fifth went out as one full batch")

        await writer.shutdown()
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "10")
    }

    @Test("shutdown takes a partial batch at once, whatever the flush interval")
    func shutdownFlushesAPartialBatch() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let writer = try Self.writer(into: database, batchSize: 500, flushInterval: 3_600)
        (0..<7).map { EventFactory.event($0) }.forEach(writer.sendFinished)
        await writer.shutdown()
        #expect(writer.statistics.written == 7)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "7")
    }
}
