@testable import Audit
import Foundation
import RelayBasics
import Testing
import TestSupport

/// The audit writer in front of a Postgres that stops answering without
/// closing anything: before `audit.postgres_timeout_ms`, its writes waited
/// forever, rows piled up in memory while the statistics said "connected,
/// 0 s behind", and the drain passed its bound. Now a stalled write ends
/// within the bound, the batch goes to the spool as in an outage, the
/// statistics say so, and every row lands once when Postgres answers again.
@Suite("Audit writer and a Postgres that stops answering", .timeLimit(.minutes(2)))
struct AuditWriterStallTests {
    static func configuration(_ conninfo: String, spool: String, instance: String, timeout: Double) -> AuditWriter.Configuration {
        var configuration = AuditWriter.Configuration(conninfo: conninfo, spoolDirectory: spool, relayInstance: instance)
        configuration.postgresTimeout = timeout
        configuration.flushInterval = 0.01
        configuration.reconnectMinimumDelay = 0.05
        configuration.reconnectMaximumDelay = 0.2
        return configuration
    }

    static func rows(_ database: TestDatabase, instance: String) throws -> (count: String?, distinct: String?) {
        let answer = try database.connect().execute(
            "SELECT count(*), count(DISTINCT apns_id) FROM apns_audit WHERE relay_instance = $1", [instance])
        return (answer.rows.first?[0] ?? nil, answer.rows.first?[1] ?? nil)
    }

    @Test("Postgres frozen under the writer: the stalled write ends within the bound, rows spool, the statistics say behind and not connected; thawed, every row lands once")
    func frozenServer() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let proxy = try FreezingTCPProxy(targetPort: try PostgresWaitBoundTests.serverPort(database.conninfo))
        defer { proxy.stop() }
        let instance = "frozen-" + UUID().uuidString.prefix(6)
        let writer = try AuditWriter.started(
            configuration: Self.configuration(
                try PostgresWaitBoundTests.through(proxy, database.conninfo), spool: temporaryDirectory(), instance: instance, timeout: 0.3),
            logger: quietLogger())
        for index in 0..<100 { writer.sendFinished(EventFactory.event(index)) }
        #expect(await eventually { writer.statistics.written == 100 }, "\(writer.statistics)")

        proxy.freeze()
        for index in 100..<300 { writer.sendFinished(EventFactory.event(index)) }
        #expect(await eventually { writer.statistics.written + writer.statistics.spooled == 300 }, "\(writer.statistics)")
        let stalled = writer.statistics
        #expect(stalled.postgresTimeouts >= 1)
        #expect(stalled.spooled >= 1)
        #expect(!stalled.connected)
        #expect(stalled.behindSeconds() > 0)
        #expect(stalled.queueDepth == 0, "nothing waits in memory")

        proxy.thaw()
        #expect(await eventually { writer.statistics.connected && writer.statistics.behindSeconds() == 0 }, "\(writer.statistics)")
        await writer.shutdown()
        let rows = try Self.rows(database, instance: instance)
        #expect(rows.count == "300" && rows.distinct == "300", "\(rows)")
    }

    @Test("the audit table locked by another transaction: Postgres cancels the writes at the bound, rows spool, and after the lock every row lands once")
    func lockedTable() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let instance = "locked-" + UUID().uuidString.prefix(6)
        let holder = try database.connect()
        try holder.execute("BEGIN")
        try holder.execute("LOCK TABLE apns_audit IN ACCESS EXCLUSIVE MODE")
        let writer = try AuditWriter.started(
            configuration: Self.configuration(database.conninfo, spool: temporaryDirectory(), instance: instance, timeout: 0.3),
            logger: quietLogger())
        for index in 0..<200 { writer.sendFinished(EventFactory.event(index)) }
        #expect(await eventually { writer.statistics.spooled == 200 }, "\(writer.statistics)")
        #expect(writer.statistics.postgresTimeouts >= 1)
        #expect(writer.statistics.written == 0)
        try holder.execute("ROLLBACK")
        #expect(await eventually { writer.statistics.replayed == 200 }, "\(writer.statistics)")
        await writer.shutdown()
        let rows = try Self.rows(database, instance: instance)
        #expect(rows.count == "200" && rows.distinct == "200", "\(rows)")
    }

    @Test("shut down while Postgres is frozen: the drain's cutoff ends the stalled write (its own bound is ten minutes), the rows spool, and the next writer on the spool writes each once")
    func shutdownWhileFrozen() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let proxy = try FreezingTCPProxy(targetPort: try PostgresWaitBoundTests.serverPort(database.conninfo))
        defer { proxy.stop() }
        let instance = "drain-" + UUID().uuidString.prefix(6)
        let spool = temporaryDirectory()
        let writer = try AuditWriter.started(
            configuration: Self.configuration(
                try PostgresWaitBoundTests.through(proxy, database.conninfo), spool: spool, instance: instance, timeout: 600),
            logger: quietLogger())
        #expect(await eventually { writer.statistics.connected })
        proxy.freeze()
        for index in 0..<50 { writer.sendFinished(EventFactory.event(index)) }
        #expect(await eventually { proxy.bytesHeld > 0 }, "a write reached the frozen server")
        await writer.shutdown(postgresWithin: 0.2)
        let drained = writer.statistics
        #expect(drained.spooled == 50, "\(drained)")
        #expect(drained.written == 0)
        #expect(drained.dropped == 0)

        proxy.thaw()
        let next = try AuditWriter.started(
            configuration: Self.configuration(database.conninfo, spool: spool, instance: instance, timeout: 10), logger: quietLogger())
        #expect(await eventually { next.statistics.replayed == 50 }, "\(next.statistics)")
        await next.shutdown()
        let rows = try Self.rows(database, instance: instance)
        #expect(rows.count == "50" && rows.distinct == "50", "\(rows)")
    }
}
