@testable import Audit
import Foundation
import Testing

/// Spool and journal records carry the row format their line was written in,
/// so rows spooled before a migration land correctly after it, and records
/// written before records carried a format (a relay upgraded with a
/// non-empty spool) still read, as format 1.
@Suite("Audit spool: row formats across a migration")
struct AuditSpoolFormatTests {
    /// Format 1's columns, frozen: lines of this layout exist on disks in
    /// the field, so this list never changes (a new column is a new format).
    static let formatOneColumns = [
        "id", "recorded_at", "started_at", "finished_at", "apns_id", "apns_unique_id", "trace_id", "app",
        "environment", "operation", "push_type", "priority", "topic", "token_fingerprint", "channel_id", "snapshot_id",
        "surface_id", "outcome", "status", "reason", "error_type", "trap_ids", "attempts", "retried", "latency_ms",
        "attempt_log", "payload_bytes", "caller", "relay_instance",
    ]

    /// A format 1 line (the pinned bytes of AuditCopyLineTests) under another row id.
    static func formatOneLine(id: String, awkward: Bool = false) -> [UInt8] {
        let line = awkward ? AuditCopyLineTests.awkwardLine : AuditCopyLineTests.fullLine
        return Array((id + line.dropFirst(36)).utf8)
    }

    static func rowID(_ index: Int) -> String { String(format: "0b7c6f43-86e4-4a8e-9d55-%012x", index) }

    /// A record framed as relays before this change wrote it: `[kind][line]`, no format byte.
    static func unversioned(_ kind: UInt8, _ line: [UInt8]) -> [UInt8] { frame([kind] + line) }

    /// A record framed with its format byte: `[format][kind][line]`.
    static func versioned(_ format: UInt8, _ kind: UInt8, _ line: [UInt8]) -> [UInt8] { frame([format, kind] + line) }

    static func frame(_ body: [UInt8]) -> [UInt8] {
        func littleEndian(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8((value >> UInt32($0 * 8)) & 0xFF) } }
        return littleEndian(UInt32(body.count)) + littleEndian(crc32(body)) + body
    }

    /// CRC-32 bit by bit, independent of zlib.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1))) }
        }
        return ~crc
    }

    static let kindAudit = UInt8(ascii: "A")
    static let kindDeadToken = UInt8(ascii: "D")
    static let kindIntent = UInt8(ascii: "I")
    static let kindCompletion = UInt8(ascii: "C")

    /// The migration a later relay ships with a new column, and the layout that writes it.
    static let regionMigration = Migration(
        version: 9001, name: "9001_test_region", sql: "ALTER TABLE apns_audit ADD COLUMN region text DEFAULT 'before-region'")
    static let formatTwo = AuditRowFormat(rawValue: 2)
    static let formatFour = AuditRowFormat(rawValue: 4)
    static let regionLayout = AuditRowLayout(
        columns: AuditRowLayout.standard.columns + [AuditColumn("region", since: formatFour) { $1.text("eu-1") }])

    @Test("format 1 is the layout the fixtures were written in; this build writes format 3 (format 1, idempotency_key_hash, apns_timestamp)")
    func formatOneIsFrozen() {
        #expect(AuditRowLayout.standard.names(in: .v1) == Self.formatOneColumns)
        #expect(AuditRowLayout.standard.format == .v3)
        #expect(AuditRowLayout.standard.names(in: .v2) == Self.formatOneColumns + ["idempotency_key_hash"])
        #expect(AuditRowLayout.standard.names(in: .v3) == Self.formatOneColumns + ["idempotency_key_hash", "apns_timestamp"])
        #expect(Self.regionLayout.names(in: .v1) == Self.formatOneColumns)
        #expect(Self.regionLayout.names(in: Self.formatFour) == Self.formatOneColumns + ["idempotency_key_hash", "apns_timestamp", "region"])
        #expect(Self.regionLayout.field("apns_id", of: Self.formatOneLine(id: Self.rowID(1)), in: .v1) == "7d3e5c2a-0f4b-4c8d-9e1a-2b3c4d5e6f70")
        #expect(Self.regionLayout.field("relay_instance", of: Self.formatOneLine(id: Self.rowID(1)), in: .v1) == "relay-a")
    }

    @Test("a record without a format byte reads as format 1, one with it as its format; each framing round-trips")
    func framing() throws {
        let directory = temporaryDirectory()
        let url = URL(fileURLWithPath: directory).appendingPathComponent("segment-0000000000000001.spool")
        let line = Self.formatOneLine(id: Self.rowID(1))
        let bytes =
            Self.unversioned(Self.kindAudit, line) + Self.unversioned(Self.kindDeadToken, Array("alpha\tx\n".utf8))
            + Self.versioned(1, Self.kindAudit, line) + Self.versioned(2, Self.kindIntent, Array("key\tline\n".utf8))
        try Data(bytes).write(to: url)
        let spool = try AuditSpool(directory: directory)
        let contents = try spool.read(url)
        #expect(contents.tornBytes == 0)
        #expect(contents.records == [
            AuditSpool.Record(kind: .audit, format: .v1, line: line),
            AuditSpool.Record(kind: .deadToken, format: .v1, line: Array("alpha\tx\n".utf8)),
            AuditSpool.Record(kind: .audit, format: .v1, line: line),
            AuditSpool.Record(kind: .intent, format: Self.formatTwo, line: Array("key\tline\n".utf8)),
        ])

        // What this build writes is the versioned framing, byte for byte.
        var encoded: [UInt8] = []
        AuditSpool.encode(AuditSpool.Record(kind: .audit, format: .v1, line: line), into: &encoded)
        #expect(encoded == Self.versioned(1, Self.kindAudit, line))
    }

    @Test("format 1 spool and journal records (with and without the format byte) replay after a migration adds a column, equal column by column to rows written before it")
    func replayAcrossMigration() async throws {
        // Rows 1-4 spooled, row 5 answered and row 6 only started in a journal, all by a format 1 relay.
        let lines = (1...6).map { Self.formatOneLine(id: Self.rowID($0), awkward: $0 % 2 == 0) }
        let deadLine = Array("alpha\tproduction\tabc123\tfp-abc\tUnregistered\t\\N\t2025-11-22T08:26:40.000Z\t2025-11-22T08:26:40.000Z\n".utf8)

        // The reference: the same lines written straight to Postgres by a
        // format 1 relay, then the migration.
        let direct = try TestDatabase.migrated()
        defer { direct.drop() }
        let connection = try direct.connect()
        _ = try connection.copyIn("COPY apns_audit (\(Self.formatOneColumns.joined(separator: ", "))) FROM STDIN", data: lines.flatMap { $0 })
        _ = try Migrator(migrations: Migration.all + [Self.regionMigration]).apply(conninfo: direct.conninfo)

        // The upgrade: the spool and journal stay on disk across the migration.
        let directory = temporaryDirectory()
        let spoolSegment =
            Self.unversioned(Self.kindAudit, lines[0]) + Self.unversioned(Self.kindAudit, lines[1])
            + Self.unversioned(Self.kindDeadToken, deadLine) + Self.versioned(1, Self.kindAudit, lines[2])
            + Self.versioned(1, Self.kindAudit, lines[3])
        try Data(spoolSegment).write(to: URL(fileURLWithPath: directory + "/segment-0000000000000001.spool"))
        let keyed = { (key: String, line: [UInt8]) in Array(key.utf8) + [0x09] + line }
        let journalSegment =
            Self.unversioned(Self.kindIntent, keyed("k5", lines[4])) + Self.unversioned(Self.kindCompletion, keyed("k5", lines[4]))
            + Self.unversioned(Self.kindIntent, keyed("k6", lines[5]))
        try Data(journalSegment).write(to: URL(fileURLWithPath: directory + "/journal-0000000000000001.journal"))

        let upgraded = try TestDatabase.migrated(Migration.all + [Self.regionMigration])
        defer { upgraded.drop() }
        var configuration = AuditWriter.Configuration(conninfo: upgraded.conninfo, spoolDirectory: directory, relayInstance: "relay-b")
        configuration.rowLayout = Self.regionLayout
        let writer = try AuditWriter.started(configuration: configuration, logger: quietLogger())
        let fresh = EventFactory.event(7)
        writer.sendFinished(fresh)
        await writer.shutdown()
        #expect(writer.statistics.recoveredCompleted == 1)
        #expect(writer.statistics.recoveredUnknown == 1)
        #expect(writer.statistics.replayed == 6)
        #expect(writer.statistics.written == 1)
        #expect(writer.statistics.quarantined == 0)
        #expect(writer.statistics.spoolBytes == 0)

        // Every column of every row, as Postgres prints it, region included.
        let query = "SELECT * FROM apns_audit WHERE id::text LIKE '0b7c6f43-%' ORDER BY id"
        let expected = try direct.connect().execute(query)
        let actual = try upgraded.connect().execute(query)
        #expect(actual.columns == expected.columns)
        #expect(actual.columns == Self.formatOneColumns + ["idempotency_key_hash", "apns_timestamp", "region"])
        #expect(expected.rows.count == 6)
        for (expectedRow, actualRow) in zip(expected.rows, actual.rows) {
            for (index, column) in expected.columns.enumerated() {
                #expect(actualRow[index] == expectedRow[index], "\(column) of \(expectedRow[0] ?? "?")")
            }
        }
        #expect(actual.rows.count == expected.rows.count)
        #expect(try upgraded.scalar("SELECT snapshot_id FROM apns_audit WHERE id = '\(Self.rowID(2))'") == "snap\t1\n\\x\r")
        #expect(try upgraded.scalar("SELECT count(*) FROM apns_audit WHERE region = 'before-region'") == "6")
        #expect(try upgraded.scalar("SELECT region FROM apns_audit WHERE apns_id = '\(fresh.send.apnsID.value)'") == "eu-1")
        #expect(try upgraded.scalar("SELECT reason FROM apns_dead_tokens WHERE token = 'abc123'") == "Unregistered")
    }

    @Test("a segment holding rows of a format newer than this build (a rollback) stays on disk, unreplayed")
    func newerFormatIsKept() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let directory = temporaryDirectory()
        let url = URL(fileURLWithPath: directory + "/segment-0000000000000001.spool")
        let newer = Self.versioned(4, Self.kindAudit, Array((String(decoding: Self.formatOneLine(id: Self.rowID(1)), as: UTF8.self).dropLast() + "\t\\N\t\\N\teu-1\n").utf8))
        try Data(Self.versioned(1, Self.kindAudit, Self.formatOneLine(id: Self.rowID(2))) + newer).write(to: url)

        let writer = try AuditWriter.started(
            configuration: .init(conninfo: database.conninfo, spoolDirectory: directory, relayInstance: "old"), logger: quietLogger())
        writer.sendFinished(EventFactory.event(1))
        await writer.shutdown()
        #expect(writer.statistics.written == 1)
        #expect(writer.statistics.replayed == 0)
        #expect(FileManager.default.fileExists(atPath: url.path), "the segment waits for a relay that knows its format")
        #expect(try Data(contentsOf: url).count == Self.versioned(1, Self.kindAudit, Self.formatOneLine(id: Self.rowID(2))).count + newer.count)
        #expect(try database.scalar("SELECT count(*) FROM apns_audit WHERE id::text LIKE '0b7c6f43-%'") == "0")
    }
}
