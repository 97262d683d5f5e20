import ArgumentParser
import Foundation

/// Where the audit database is: --database-url, else APNS_RELAY_DATABASE_URL,
/// else libpq's PG* environment variables.
struct DatabaseOptions: ParsableArguments {
    @Option(name: .customLong("database-url"), help: "libpq connection string or postgresql:// URL (default: $APNS_RELAY_DATABASE_URL, then the PG* variables).")
    var url: String?

    var conninfo: String { url ?? ProcessInfo.processInfo.environment["APNS_RELAY_DATABASE_URL"] ?? "" }
}
