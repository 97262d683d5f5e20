public import APNs
public import Logging
import Dispatch
public import Relay

/// The ingress' dead-token feed, read from `apns_dead_tokens`.
///
/// libpq calls block, so each query runs on a Dispatch queue of its own
/// rather than on Swift's cooperative pool.
public struct AuditDeadTokenSource: DeadTokenSource {
    public let conninfo: String
    /// Where server notices go (nil discards them).
    public let logger: Logger?
    /// How long the query may wait on Postgres.
    public let bound: PostgresWaitBound?
    private let queue = DispatchQueue(label: "apns-relay.dead-tokens", attributes: .concurrent)

    public init(conninfo: String, bound: PostgresWaitBound? = nil, logger: Logger? = nil) {
        self.conninfo = conninfo
        self.bound = bound
        self.logger = logger
    }

    public func deadTokens(app: String, environment: Environment?, sinceMilliseconds: Int64, limit: Int) async throws -> [DeadTokenEntry] {
        let (conninfo, logger, bound) = (conninfo, logger, bound)
        return try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result {
                    try Self.query(conninfo: conninfo, logger: logger, bound: bound, app: app, environment: environment, since: sinceMilliseconds, limit: limit)
                })
            }
        }
    }

    static func query(conninfo: String, logger: Logger?, bound: PostgresWaitBound? = nil, app: String, environment: Environment?, since: Int64, limit: Int) throws -> [DeadTokenEntry] {
        let sql = """
            SELECT token, environment, reason,
                   (extract(epoch FROM apns_timestamp) * 1000)::bigint,
                   (extract(epoch FROM first_seen) * 1000)::bigint,
                   (extract(epoch FROM last_seen) * 1000)::bigint
            FROM apns_dead_tokens
            WHERE app = $1 AND last_seen >= to_timestamp($2::double precision / 1000)
              AND ($3::text IS NULL OR environment = $3::text)
            ORDER BY last_seen DESC
            LIMIT $4
            """
        let rows = try PostgresConnection(conninfo: conninfo, logger: logger, bound: bound).execute(sql, [app, String(since), environment?.rawValue, String(limit)])
        return rows.rows.map { row in
            DeadTokenEntry(
                token: row[0] ?? "", environment: row[1] ?? "", reason: row[2] ?? "",
                apnsTimestampMilliseconds: row[3].flatMap { Int64($0) },
                firstSeenMilliseconds: row[4].flatMap { Int64($0) } ?? 0, lastSeenMilliseconds: row[5].flatMap { Int64($0) } ?? 0)
        }
    }
}
