public import Logging

/// Applies the schema migrations to a database: idempotent, each migration in
/// its own transaction, recorded in `apns_relay_migrations`, and under an
/// advisory lock so two relays starting together cannot race.
public struct Migrator: Sendable {
    /// The advisory lock key (an arbitrary constant shared by every relay).
    static let lockKey = 7_305_526_470_135_829_217

    public let migrations: [Migration]

    public init(migrations: [Migration] = Migration.all) {
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// What `apply` did.
    public struct Report: Sendable {
        /// Migrations applied by this call.
        public var applied: [String]
        /// Migrations that were already there.
        public var alreadyApplied: [String]
    }

    /// Brings the database at `conninfo` up to date.
    ///
    /// - Throws: ``MigrationError`` when a migration fails (its transaction is
    ///   rolled back and later ones are not tried) or when an applied
    ///   migration's SQL no longer matches its recorded checksum.
    /// - Parameter logger: where the server's notices go ("already exists,
    ///   skipping" at debug); nil discards them.
    /// - Parameter bound: how long the connect and each statement may wait
    ///   (the relay's start-up); nil waits as long as they take (`apns-relay migrate`).
    public func apply(conninfo: String, logger: Logger? = nil, bound: PostgresWaitBound? = nil) throws -> Report {
        let connection = try PostgresConnection(conninfo: conninfo, logger: logger, bound: bound)
        try connection.execute("SELECT pg_advisory_lock(\(Self.lockKey))")
        defer { _ = try? connection.execute("SELECT pg_advisory_unlock(\(Self.lockKey))") }

        try connection.execute("""
            CREATE TABLE IF NOT EXISTS apns_relay_migrations (
                version    integer PRIMARY KEY,
                name       text NOT NULL,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
        let recorded = try connection.execute("SELECT version, name, checksum FROM apns_relay_migrations")
        var checksums: [Int: (name: String, checksum: String)] = [:]
        for row in recorded.rows {
            if let version = row[0].flatMap(Int.init) { checksums[version] = (row[1] ?? "", row[2] ?? "") }
        }

        var report = Report(applied: [], alreadyApplied: [])
        for migration in migrations {
            if let existing = checksums[migration.version] {
                guard existing.checksum == migration.checksum else {
                    throw MigrationError(
                        migration: migration.name,
                        message: "was changed after it was applied (checksum \(existing.checksum) in the database, \(migration.checksum) now); add a new migration instead")
                }
                report.alreadyApplied.append(migration.name)
                continue
            }
            do {
                try connection.execute("BEGIN")
                try connection.execute(migration.sql)
                try connection.execute(
                    "INSERT INTO apns_relay_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    [String(migration.version), migration.name, migration.checksum])
                try connection.execute("COMMIT")
                report.applied.append(migration.name)
            } catch {
                _ = try? connection.execute("ROLLBACK")
                throw MigrationError(migration: migration.name, message: "\(error)")
            }
        }
        return report
    }
}

/// A migration could not be applied.
public struct MigrationError: Error, Sendable, CustomStringConvertible {
    public var migration: String
    public var message: String
    public var description: String { "migration \(migration) \(message)" }
}
