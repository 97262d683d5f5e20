@testable import Audit
import Foundation
import Testing

@Suite("Audit schema migrations")
struct MigratorTests {
    @Test("the embedded migrations are exactly the files in sql/migrations")
    func embeddedMatchesFiles() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let directory = root.appendingPathComponent("sql/migrations")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(files.map { String($0.dropLast(4)) } == Migration.all.map(\.name), "run scripts/embed-sql")
        for (file, migration) in zip(files, Migration.all) {
            var text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            while text.hasSuffix("\n") { text.removeLast() }
            #expect(text == migration.sql, "\(file) differs from the embedded copy: run scripts/embed-sql")
        }
    }

    @Test("applies from empty, records each migration, and is idempotent")
    func appliesOnce() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let first = try Migrator().apply(conninfo: database.conninfo)
        #expect(first.applied == Migration.all.map(\.name))
        let second = try Migrator().apply(conninfo: database.conninfo)
        #expect(second.applied.isEmpty)
        #expect(second.alreadyApplied == Migration.all.map(\.name))
        #expect(try database.scalar("SELECT count(*) FROM apns_relay_migrations") == String(Migration.all.count))
        #expect(try database.scalar("SELECT to_regclass('apns_dead_tokens') IS NOT NULL") == "t")
        #expect(try database.scalar("SELECT apns_audit_ensure_partitions(date '2026-11-22', 3)") == "3")
        #expect(try database.scalar("SELECT apns_audit_ensure_partitions(date '2026-11-22', 3)") == "0")
    }

    @Test("two relays migrating at once: the advisory lock lets one apply, the other finds it done")
    func concurrentMigrations() async throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let conninfo = database.conninfo
        async let one = Task.detached { try Migrator().apply(conninfo: conninfo) }.value
        async let two = Task.detached { try Migrator().apply(conninfo: conninfo) }.value
        let reports = try await [one, two]
        #expect(reports.map(\.applied.count).sorted() == [0, Migration.all.count])
        #expect(try database.scalar("SELECT count(*) FROM apns_relay_migrations") == String(Migration.all.count))
    }

    @Test("an applied migration whose SQL changed is refused, and a failing one rolls back")
    func checksumsAndRollback() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        _ = try Migrator().apply(conninfo: database.conninfo)
        var edited = Migration.all
        edited[0].sql += "\n-- edited"
        #expect(throws: MigrationError.self) { try Migrator(migrations: edited).apply(conninfo: database.conninfo) }
        let broken = Migration.all + [Migration(version: 999, name: "0999_broken", sql: "CREATE TABLE half_done (a int); SELECT no_such_function();")]
        #expect(throws: MigrationError.self) { try Migrator(migrations: broken).apply(conninfo: database.conninfo) }
        #expect(try database.scalar("SELECT to_regclass('half_done') IS NULL") == "t")
        #expect(try database.scalar("SELECT count(*) FROM apns_relay_migrations WHERE version = 999") == "0")
    }
}
