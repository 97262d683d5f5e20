@testable import Audit
import APNs
import Foundation
import Logging
import Relay
import Testing
import RelayBasics

func quietLogger() -> Logger { Logger(label: "audit-test") { _ in SwiftLogNoOpLogHandler() } }

func temporaryDirectory() -> String {
    let path = NSTemporaryDirectory() + "apns-relay-spool-" + UUID().uuidString
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

@Suite("Audit writer")
struct AuditWriterTests {
    @Test("100,000 sends become exactly 100,000 rows with their content intact")
    func hundredThousandRows() async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        let writer = try AuditWriter.started(
            configuration: .init(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "test-1"),
            logger: quietLogger())
        var sample: SendEvent?
        for index in 0..<100_000 {
            let event = EventFactory.event(index, dead: index % 1000 == 7)
            if index == 4242 { sample = event }
            writer.sendFinished(event)
        }
        await writer.shutdown()
        let statistics = writer.statistics
        #expect(statistics.written + statistics.spooled == 100_000)
        #expect(statistics.dropped == 0)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "100000")
        #expect(try database.scalar("SELECT count(DISTINCT apns_id) FROM apns_audit") == "100000")
        #expect(try database.scalar("SELECT count(*) FROM apns_dead_tokens") == "100")

        let event = try #require(sample)
        let rows = try database.connect().execute(
            "SELECT app, operation, push_type, priority, snapshot_id, attempts, retried, trap_ids, attempt_log->0->>'status', caller, relay_instance, trace_id, to_char(recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS') FROM apns_audit WHERE apns_id = $1",
            [event.send.apnsID.value])
        let row = try #require(rows.rows.first)
        #expect(row[0] == event.send.app)
        #expect(row[1] == event.send.operation.rawValue)
        #expect(row[2] == event.send.pushType?.rawValue)
        #expect(row[3] == event.send.priority.map { String($0.rawValue) })
        #expect(row[4] == "snap\t4242\n\\x")
        #expect(row[5] == "1")
        #expect(row[6] == "f")
        #expect(row[7] == "{}")
        #expect(row[8] == "200")
        #expect(row[9] == "backend-2")
        #expect(row[10] == "test-1")
        #expect(row[11] == String(format: "%032x", 4242))
        #expect(row[12].map { RFC3339.format(nanoseconds: event.finishedAt).hasPrefix($0) } == true)
    }

    @Test("Postgres unreachable: rows spool to disk, then replay exactly once when it answers")
    func spoolAndReplay() async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        let spoolDirectory = temporaryDirectory()
        // Nothing listens on port 1: every connection attempt fails at once.
        var offline = AuditWriter.Configuration(conninfo: "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", spoolDirectory: spoolDirectory, relayInstance: "test-2")
        offline.reconnectMinimumDelay = 0.01
        let first = try AuditWriter.started(configuration: offline, logger: quietLogger())
        let events = (0..<5_000).map { EventFactory.event($0, dead: $0 % 500 == 0) }
        events.forEach(first.sendFinished)
        await first.shutdown()
        #expect(first.statistics.spooled == 5_000)
        #expect(first.statistics.written == 0)
        #expect(first.statistics.spoolBytes > 0)

        // The same rows written once already (an acknowledgement lost) must not double.
        let online = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: spoolDirectory, relayInstance: "test-2")
        let second = try AuditWriter.started(configuration: online, logger: quietLogger())
        second.sendFinished(EventFactory.event(99_999))
        await second.shutdown()
        #expect(second.statistics.replayed == 5_000)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "5001")
        #expect(try database.scalar("SELECT count(*) FROM apns_dead_tokens") == "10")
        #expect(second.statistics.spoolBytes == 0)

        // Replaying the same spool content again adds nothing (idempotent by primary key).
        let records = events.prefix(100).map { AuditRecord(event: $0, relayInstance: "x") }
        let third = try await AuditSpool.replayTwice(records, into: database, relayInstance: "x")
        #expect(third.statistics.replayed == 200)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "5101")
    }

    @Test("a torn last record in a spool segment is skipped with a warning, the rest replayed")
    func tornRecord() async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        let directory = temporaryDirectory()
        let spool = try AuditSpool(directory: directory)
        let records = (0..<50).map { AuditRecord(event: EventFactory.event($0), relayInstance: "torn") }
        try spool.append(records.map { AuditSpool.Record(kind: .audit, line: $0.copyLine()) })
        spool.sealCurrent()
        // A crash mid-write: half of one more record at the end of the segment.
        var partial: [UInt8] = []
        AuditSpool.encode(AuditSpool.Record(kind: .audit, line: AuditRecord(event: EventFactory.event(51), relayInstance: "torn").copyLine()), into: &partial)
        let segment = try #require(spool.segments().first)
        let handle = try FileHandle(forWritingTo: segment)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(partial.prefix(partial.count / 2)))
        try handle.close()
        #expect(try spool.read(segment).records.count == 50)
        #expect(try spool.read(segment).tornBytes == partial.count / 2)

        let writer = try AuditWriter.started(configuration: .init(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "torn"), logger: quietLogger())
        await writer.shutdown()
        #expect(writer.statistics.replayed == 50)
        #expect(writer.statistics.tornRecords == 1)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "50")
    }

    @Test("a corrupted checksum stops the segment read at that record")
    func corruptedChecksum() throws {
        let spool = try AuditSpool(directory: temporaryDirectory())
        try spool.append((0..<3).map { AuditSpool.Record(kind: .deadToken, line: Array("line \($0)\n".utf8)) })
        spool.sealCurrent()
        let segment = try #require(spool.segments().first)
        var bytes = [UInt8](try Data(contentsOf: segment))
        bytes[bytes.count - 2] ^= 0xFF
        try Data(bytes).write(to: segment)
        let contents = try spool.read(segment)
        #expect(contents.records.map(\.line) == [Array("line 0\n".utf8), Array("line 1\n".utf8)])
        #expect(contents.tornBytes > 0)
    }

    @Test("a write the disk cut short (file size limit, like ENOSPC) leaves no broken record: later appends stay readable")
    func partialWriteIsCutBack() throws {
        let spool = try AuditSpool(directory: temporaryDirectory())
        try spool.append([AuditSpool.Record(kind: .deadToken, line: Array("first\n".utf8))])
        let segment = try #require(spool.segments().first)
        let written = try #require(try FileManager.default.attributesOfItem(atPath: segment.path)[.size] as? Int)

        // A file-size limit just past what is there makes the next write stop
        // part way (EFBIG once the limit is reached), as a full disk would.
        signal(SIGXFSZ, SIG_IGN)
        var saved = rlimit()
        getrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved)
        var limited = saved
        limited.rlim_cur = rlim_t(written + 40)
        setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limited)
        let failed = (try? spool.append([AuditSpool.Record(kind: .deadToken, line: Array(repeating: UInt8(ascii: "x"), count: 4096))])) == nil
        setrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved)
        #expect(failed, "the write over the limit must fail")

        try spool.append([AuditSpool.Record(kind: .deadToken, line: Array("after\n".utf8))])
        spool.sealCurrent()
        let records = try spool.segments().flatMap { try spool.read($0).records.map(\.line) }
        #expect(records == [Array("first\n".utf8), Array("after\n".utf8)])
        #expect(try spool.segments().allSatisfy { try spool.read($0).tornBytes == 0 })
    }

    @Test("COPY text escapes tabs, newlines and backslashes, and writes NULL as \\N")
    func copyEscaping() {
        var writer = CopyLineWriter(line: [])
        for field in ["a\tb", nil, "c\nd\\e\r"] { writer.text(field) }
        let line = writer.finish()
        #expect(String(decoding: line, as: UTF8.self) == "a\\tb\t\\N\tc\\nd\\\\e\\r\n")
        #expect(CopyText.array(["MS015", "x\"y"]) == #"{"MS015","x\"y"}"#)
    }
}

@Suite("Audit writer under faults")
struct AuditFaultTests {
    @Test("the server kills the writer's connection mid-run, repeatedly: no row lost, none duplicated")
    func connectionKilledMidRun() async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        var configuration = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "fault")
        configuration.reconnectMinimumDelay = 0.01
        configuration.batchSize = 200
        let writer = try AuditWriter.started(configuration: configuration, logger: quietLogger())
        let admin = try database.connect()
        let total = 30_000
        for index in 0..<total {
            writer.sendFinished(EventFactory.event(index, dead: index % 1000 == 3))
            if index % 5_000 == 2_500 {
                // Terminate this test's writer backends (other tests' writers share the server).
                _ = try admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'apns-relay audit writer' AND datname = current_database()")
            }
        }
        await writer.shutdown()
        let statistics = writer.statistics
        #expect(statistics.dropped == 0)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == String(total))
        #expect(try database.scalar("SELECT count(DISTINCT id) FROM apns_audit") == String(total))
        #expect(try database.scalar("SELECT count(*) FROM apns_dead_tokens") == "30")
        #expect(statistics.spooled > 0 && statistics.replayed == statistics.spooled, "the kills must force spooling and replay: \(statistics)")
        #expect(statistics.written + statistics.replayed == total)
    }
}

@Suite("Audit writer back-pressure")
struct AuditBackPressureTests {
    @Test("past the high-water mark rows go through the spool, and shutdown replays them all")
    func highWaterMark() async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        var configuration = AuditWriter.Configuration(conninfo: database.conninfo, spoolDirectory: temporaryDirectory(), relayInstance: "hw")
        configuration.highWaterMark = 100
        configuration.flushInterval = 0.5
        let writer = try AuditWriter.started(configuration: configuration, logger: quietLogger())
        for index in 0..<5_000 { writer.sendFinished(EventFactory.event(index)) }
        await writer.shutdown()
        let statistics = writer.statistics
        #expect(statistics.spooled > 0, "a queue past the high-water mark must spill to the spool: \(statistics)")
        #expect(statistics.replayed == statistics.spooled)
        #expect(statistics.written + statistics.replayed == 5_000)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit") == "5000")
        #expect(statistics.spoolBytes == 0)
    }
}
