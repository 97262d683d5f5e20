import Foundation
import TestSupport

/// How a database's audit accounts for the sends a load generator saw
/// answered 200 (their apns-ids): the figures the process tests assert on and
/// print for the record.
struct AuditTally: CustomStringConvertible {
    /// Sends answered 200.
    var answered: Int
    /// Every row of `apns_audit` (answered or not).
    var rows: Int
    /// Answered sends without a row.
    var missing: Int
    /// apns-ids with more than one row.
    var duplicated: Int
    /// Rows with outcome `unknown` (recovered from a journal: APNs had not answered).
    var unknown: Int
    /// Answered sends whose row says `unknown`: never right, the relay knew the outcome.
    var answeredButUnknown: Int

    var description: String {
        "answered \(answered), rows \(rows), missing \(missing), duplicated ids \(duplicated), unknown rows \(unknown), answered-but-unknown \(answeredButUnknown)"
    }

    /// Runs `sql` with the ids in a temporary table `answered(id)`, loaded
    /// with `\copy` from a file: a load of many thousand sends (the old
    /// relay answered 200 to every send on a full disk) would not fit in one
    /// psql argument.
    private static func query(_ database: String, ids: Set<String>, _ sql: String) async throws -> String {
        let directory = NSTemporaryDirectory() + "apns-relay-tally-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let idFile = directory + "/ids", script = directory + "/tally.sql"
        try ids.sorted().map { $0 + "\n" }.joined().write(toFile: idFile, atomically: true, encoding: .utf8)
        try "CREATE TEMP TABLE answered(id text PRIMARY KEY);\n\\copy answered FROM '\(idFile)'\n\(sql);\n".write(toFile: script, atomically: true, encoding: .utf8)
        let (status, output) = try await ProcessRunner.runOffPool(["psql", database, "-q", "-At", "-v", "ON_ERROR_STOP=1", "-f", script])
        guard status == 0 else { throw TestRelayError("psql: \(output)") }
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Waits until every answered send has a row (a restarted relay replays its journal in the background).
    static func waitForRows(of ids: Set<String>, in database: String, timeout: Double = 120) async -> Bool {
        await eventually(timeout) {
            let count = try? await query(database, ids: ids, "SELECT count(DISTINCT a.apns_id) FROM apns_audit a JOIN answered v ON a.apns_id = v.id")
            return count == String(ids.count)
        }
    }

    static func of(_ ids: Set<String>, in database: String) async throws -> AuditTally {
        let summary = try await query(database, ids: ids, """
            WITH per_id AS (SELECT apns_id, count(*) AS n, bool_or(outcome = 'unknown') AS unknown FROM apns_audit GROUP BY apns_id)
            SELECT (SELECT count(*) FROM answered),
                   (SELECT count(*) FROM apns_audit),
                   (SELECT count(*) FROM answered WHERE id NOT IN (SELECT apns_id FROM apns_audit)),
                   (SELECT count(*) FROM per_id WHERE n > 1),
                   (SELECT count(*) FROM apns_audit WHERE outcome = 'unknown'),
                   (SELECT count(*) FROM per_id JOIN answered ON per_id.apns_id = answered.id WHERE per_id.unknown)
            """)
        let figures = summary.split(separator: "|").compactMap { Int($0) }
        guard figures.count == 6 else { throw TestRelayError("odd audit summary: \(summary)") }
        return AuditTally(
            answered: figures[0], rows: figures[1], missing: figures[2], duplicated: figures[3], unknown: figures[4], answeredButUnknown: figures[5])
    }
}
