import ArgumentParser
import Audit

/// `apns-relay migrate`: brings the audit schema up to date.
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply the audit schema migrations (idempotent, one transaction each, under an advisory lock).")

    @OptionGroup var database: DatabaseOptions
    @Option(name: .customLong("log-level"), help: "Level of the JSON log lines on standard error (server notices are debug).")
    var logLevel = "info"

    func run() throws {
        // Server notices ("already exists, skipping") become JSON log lines
        // on standard error, never raw libpq text.
        let report = try Migrator().apply(conninfo: database.conninfo, logger: makeLogger(level: logLevel))
        for name in report.alreadyApplied { print("already applied  \(name)") }
        for name in report.applied { print("applied          \(name)") }
        print(report.applied.isEmpty ? "schema is up to date" : "applied \(report.applied.count) migration(s)")
    }
}
