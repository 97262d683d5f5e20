@testable import Audit
import Foundation
import Testing

/// The Postgres that scripts/test started, and a fresh database per test so
/// tests running in parallel never see each other's rows.
struct TestDatabase {
    let name: String
    let conninfo: String
    private let adminConninfo: String

    static var serverURL: String? { ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] }

    /// Fails with a clear message when the test database is not configured.
    init() throws {
        guard let url = Self.serverURL, !url.isEmpty else {
            Issue.record("APNS_RELAY_TEST_DATABASE_URL is not set: run the tests with scripts/test, which starts Postgres")
            throw SkipDatabase()
        }
        adminConninfo = url
        name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        let admin = try PostgresConnection(conninfo: url)
        try admin.execute("CREATE DATABASE \(name)")
        conninfo = Self.replacingDatabase(in: url, with: name)
    }

    /// A fresh database with `migrations` applied.
    static func migrated(_ migrations: [Migration] = Migration.all) throws -> TestDatabase {
        let database = try TestDatabase()
        do {
            _ = try Migrator(migrations: migrations).apply(conninfo: database.conninfo)
        } catch {
            database.drop()
            throw error
        }
        return database
    }

    /// Connects to this test's database.
    func connect() throws -> PostgresConnection { try PostgresConnection(conninfo: conninfo) }

    func drop() {
        guard let admin = try? PostgresConnection(conninfo: adminConninfo) else { return }
        _ = try? admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    static func replacingDatabase(in url: String, with database: String) -> String {
        guard let slash = url.lastIndex(of: "/") else { return url }
        let query = url[slash...].firstIndex(of: "?").map { String(url[$0...]) } ?? ""
        return String(url[...slash]) + database + query
    }

    /// Makes `now()` answer `instant` on every later connection to this
    /// database, so a test's verdict never depends on the wall clock.
    ///
    /// The shipped SQL (on-call queries, partition functions, the writer's
    /// maintenance) calls `now()` unqualified; with `pinned_clock` ahead of
    /// `pg_catalog` on the database's search_path (after `public`, so tables
    /// and partitions are still created there), that call resolves to a
    /// STABLE function returning the fixed instant, while the SQL stays
    /// byte for byte what operators run.
    func pinClock(at instant: String) throws {
        let connection = try connect()
        try connection.execute("CREATE SCHEMA IF NOT EXISTS pinned_clock")
        try connection.execute(
            "CREATE OR REPLACE FUNCTION pinned_clock.now() RETURNS timestamptz LANGUAGE sql STABLE AS $$ SELECT '\(instant)'::timestamptz $$")
        try connection.execute("ALTER DATABASE \(name) SET search_path = public, pinned_clock, pg_catalog")
    }

    /// Scalar query helper.
    func scalar(_ sql: String) throws -> String? {
        try connect().execute(sql).rows.first?.first ?? nil
    }
}

struct SkipDatabase: Error {}

extension AuditSpool {
    /// Spools every record twice (a replay of rows that may already be in
    /// Postgres) and lets a writer on `database` replay the spool; returns
    /// the writer, shut down, for its statistics.
    static func replayTwice(_ records: [AuditRecord], into database: TestDatabase, relayInstance: String) async throws -> AuditWriter {
        let spool = try AuditSpool(directory: temporaryDirectory())
        for _ in 0..<2 { try spool.append(records.map { AuditSpool.Record(kind: .audit, line: $0.copyLine()) }) }
        spool.sealCurrent()
        let writer = try AuditWriter.started(
            configuration: .init(conninfo: database.conninfo, spoolDirectory: spool.directory.path, relayInstance: relayInstance), logger: quietLogger())
        await writer.shutdown()
        return writer
    }
}
