import CLibPQ
import Foundation
import Testing

@Suite("libpq is linked and talks to the Postgres that scripts/test starts")
struct LibPQLinkTests {
    static let environment = ProcessInfo.processInfo.environment

    @Test(
        "connect, SELECT version(), a round trip through a temp table",
        .disabled(if: environment["APNS_RELAY_SKIP_DATABASE_TESTS"] == "1",
                  "APNS_RELAY_SKIP_DATABASE_TESTS=1")
    )
    func roundTrip() throws {
        // Fails rather than skips, so CI can never pass without a database.
        guard let url = Self.environment["APNS_RELAY_TEST_DATABASE_URL"], !url.isEmpty else {
            Issue.record("""
                APNS_RELAY_TEST_DATABASE_URL is not set: run the tests with scripts/test, \
                which starts a throwaway Postgres (or set APNS_RELAY_SKIP_DATABASE_TESTS=1 to skip)
                """)
            return
        }
        let connection = try #require(PQconnectdb(url))
        defer { PQfinish(connection) }
        try #require(PQstatus(connection) == CONNECTION_OK,
                     "cannot connect to \(url): \(String(cString: PQerrorMessage(connection)))")

        let version = try Self.query(connection, "SELECT version()")
        #expect(version.first?.first??.hasPrefix("PostgreSQL ") == true, "got \(version)")
        #expect(PQserverVersion(connection) >= 120_000)

        _ = try Self.query(connection, "CREATE TEMP TABLE interop (id integer PRIMARY KEY, note text)")
        let note = "it's ünïcode ✓ and a \"quote\""
        _ = try Self.query(connection, "INSERT INTO interop VALUES ($1, $2), ($3, NULL)",
                           parameters: ["7", note, "8"])
        let rows = try Self.query(connection, "SELECT id, note FROM interop ORDER BY id")
        #expect(rows.count == 2)
        #expect(rows.first == ["7", note])
        #expect(rows.last == ["8", nil])
    }

    /// Runs `sql` with text parameters; returns the rows as text, nil for NULL.
    static func query(_ connection: OpaquePointer, _ sql: String, parameters: [String] = []) throws -> [[String?]] {
        let cStrings = parameters.map { strdup($0) }
        defer { cStrings.forEach { free($0) } }
        let result = cStrings.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { values in
                PQexecParams(connection, sql, Int32(values.count), nil, values.baseAddress, nil, nil, 0)
            }
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        try #require(status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK,
                     "\(sql): \(String(cString: PQresultErrorMessage(result)))")
        return (0..<PQntuples(result)).map { row in
            (0..<PQnfields(result)).map { column in
                PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
            }
        }
    }
}
