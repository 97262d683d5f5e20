public import Logging
import Dispatch
public import Relay
import RelayJSON
import RelayBasics
import Synchronization

/// The ingress' `Idempotency-Key`s in `apns_idempotency_keys` (migration
/// 0005), shared by every relay on the database.
///
/// libpq calls block, so each statement runs on a Dispatch queue of its own,
/// never on Swift's cooperative pool, over a few pooled connections (a
/// keyed send costs two statements: the claim and the answer).
///
/// Times are the relay's (`now`, unix ms), passed to every statement, so a
/// test can move the clock past the window instead of waiting for it.
public final class PostgresIdempotencyStore: IdempotencyStore {
    public let conninfo: String
    /// Seconds a key holds its first answer.
    public let windowSeconds: Double
    /// Seconds an in-flight claim is held for its relay: past it, the relay is
    /// taken to have stopped before recording the answer and the next request
    /// with the key sends (the audit row of the first says `unknown`).
    public let leaseSeconds: Double
    /// How long a statement may wait on Postgres; past it the send is
    /// answered as if Postgres were down (the ingress' 503), never held.
    public let bound: PostgresWaitBound?
    let now: @Sendable () -> Int64
    let logger: Logger?
    private let queue = DispatchQueue(label: "apns-relay.idempotency", attributes: .concurrent)
    private let idle = Mutex<[PostgresConnection]>([])
    /// Connections kept open between statements.
    static let idleLimit = 8

    public init(
        conninfo: String, windowSeconds: Double, leaseSeconds: Double, bound: PostgresWaitBound? = nil, logger: Logger? = nil,
        now: (@Sendable () -> Int64)? = nil
    ) {
        self.conninfo = conninfo
        self.windowSeconds = windowSeconds
        self.leaseSeconds = leaseSeconds
        self.bound = bound
        self.logger = logger
        self.now = now ?? { Int64(UnixTime.nowNanoseconds() / 1_000_000) }
    }

    public func claim(_ claim: IdempotencyClaim) async throws -> IdempotencyVerdict {
        let at = now()
        return try await run { connection in
            // A row that expired or whose relay let its lease lapse is claimed
            // over in the same statement; any other row stays as it is, and of
            // two relays inserting one key exactly one gets a row back.
            for _ in 0..<3 {
                let inserted = try connection.execute(Self.claimSQL, [
                    claim.caller, claim.keyHash, claim.requestHash, claim.token, String(at), String(self.leaseSeconds), String(self.windowSeconds),
                ])
                if !inserted.rows.isEmpty { return .claimed }
                let found = try connection.execute(Self.readSQL, [claim.caller, claim.keyHash, String(at)])
                // Purged between the two statements: claim again.
                guard let row = found.rows.first else { continue }
                return Self.verdict(row, claim: claim)
            }
            throw PostgresError(message: "the idempotency key could neither be claimed nor read", sqlState: nil)
        }
    }

    public func complete(_ claim: IdempotencyClaim, answer: IdempotentAnswer) async throws {
        try await record(answer, of: claim, owner: claim.token, with: Self.completeSQL)
    }

    public func settle(_ claim: IdempotencyClaim, over owner: String, answer: IdempotentAnswer) async throws {
        try await record(answer, of: claim, owner: owner, with: Self.settleSQL)
    }

    /// Stores `answer` for the key `claim` names, held by the claim `owner`
    /// (``completeSQL``, or ``settleSQL`` over a claim that never recorded one).
    private func record(_ answer: IdempotentAnswer, of claim: IdempotencyClaim, owner: String, with sql: String) async throws {
        let headers = JSONValue.array(answer.headers.map { .array([.string($0.name), .string($0.value)]) }).encodedString()
        try await run { connection in
            try connection.execute(sql, [
                claim.caller, claim.keyHash, owner, answer.apnsID, answer.status.map(String.init), answer.reason, String(answer.attempts),
                String(answer.httpStatus), headers, String(decoding: answer.body, as: UTF8.self),
            ])
        }
    }

    public func release(_ claim: IdempotencyClaim) async throws {
        try await run { connection in
            try connection.execute(
                "DELETE FROM apns_idempotency_keys WHERE caller = $1 AND key_hash = $2 AND owner = $3 AND state = 'in_flight'",
                [claim.caller, claim.keyHash, claim.token])
        }
    }

    /// Deletes at most `limit` rows past their window; returns how many. Run
    /// now and then (``RelayServer`` does every minute): bounded, so one run
    /// never holds the table long whatever piled up.
    @discardableResult
    public func purgeExpired(limit: Int = 1000) async throws -> Int {
        let at = now()
        return try await run { connection in
            let rows = try connection.execute("""
                WITH expired AS (
                    SELECT caller, key_hash FROM apns_idempotency_keys
                    WHERE expires_at <= to_timestamp($1::double precision / 1000) LIMIT $2)
                DELETE FROM apns_idempotency_keys k USING expired e
                WHERE k.caller = e.caller AND k.key_hash = e.key_hash
                RETURNING 1
                """, [String(at), String(limit)])
            return rows.rows.count
        }
    }

    static let claimSQL = """
        INSERT INTO apns_idempotency_keys AS k (caller, key_hash, request_hash, state, owner, lease_until, created_at, expires_at)
        VALUES ($1, $2, $3, 'in_flight', $4,
                to_timestamp($5::double precision / 1000) + make_interval(secs => $6::double precision),
                to_timestamp($5::double precision / 1000),
                to_timestamp($5::double precision / 1000) + make_interval(secs => $7::double precision))
        ON CONFLICT (caller, key_hash) DO UPDATE SET
            request_hash = EXCLUDED.request_hash, state = 'in_flight', owner = EXCLUDED.owner,
            lease_until = EXCLUDED.lease_until, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at,
            apns_id = NULL, status = NULL, reason = NULL, attempts = NULL,
            answer_status = NULL, answer_headers = NULL, answer_body = NULL
        WHERE k.expires_at <= EXCLUDED.created_at
           OR (k.state = 'in_flight' AND k.lease_until <= EXCLUDED.created_at AND NOT EXISTS (\(sentSQL)))
        RETURNING 1
        """

    /// The audit row of the send that holds key `k`, if it finished: a lease
    /// that ran out without an answer recorded is claimed over only when
    /// there is none, so a send whose answer the store missed (Postgres
    /// away when it was answered) is never sent twice. Its rows reach the
    /// table from the relay's journal; `apns_audit_idempotency_key` (0008)
    /// makes this an index probe.
    static let sentSQL = """
        SELECT 1 FROM apns_audit a
        WHERE a.caller = k.caller AND a.idempotency_key_hash = k.key_hash AND a.recorded_at >= k.created_at
        """

    /// The key's row and, when its lease ran out with no answer recorded,
    /// the audit row of its send (see ``sentSQL``).
    static let readSQL = """
        SELECT k.request_hash, k.state, k.apns_id, k.status, k.reason, k.attempts, k.answer_status, k.answer_headers, k.answer_body, k.owner,
               a.apns_id, a.outcome, a.status, a.reason, a.error_type, a.attempts, a.latency_ms, a.retried,
               array_to_string(a.trap_ids, ','), a.apns_unique_id, (extract(epoch FROM a.apns_timestamp) * 1000)::bigint
        FROM apns_idempotency_keys k
        LEFT JOIN LATERAL (
            SELECT * FROM apns_audit a
            WHERE k.state = 'in_flight' AND k.lease_until <= to_timestamp($3::double precision / 1000)
              AND a.caller = k.caller AND a.idempotency_key_hash = k.key_hash AND a.recorded_at >= k.created_at
            ORDER BY a.recorded_at LIMIT 1
        ) a ON true
        WHERE k.caller = $1 AND k.key_hash = $2
        """

    static let settleSQL = """
        UPDATE apns_idempotency_keys SET state = 'done', apns_id = $4, status = $5::integer, reason = $6, attempts = $7::integer,
            answer_status = $8::integer, answer_headers = $9, answer_body = $10
        WHERE caller = $1 AND key_hash = $2 AND owner = $3 AND state = 'in_flight'
        """

    static let completeSQL = """
        UPDATE apns_idempotency_keys SET state = 'done', apns_id = $4, status = $5::integer, reason = $6, attempts = $7::integer,
            answer_status = $8::integer, answer_headers = $9, answer_body = $10
        WHERE caller = $1 AND key_hash = $2 AND owner = $3
        """

    static func verdict(_ row: [String?], claim: IdempotencyClaim) -> IdempotencyVerdict {
        guard row[0] == claim.requestHash else { return .reused }
        // This claim's own row: its INSERT committed before the connection
        // broke and the claim was run again on a fresh one.
        guard row[1] == "done" else {
            if row[9] == claim.token { return .claimed }
            if let sent = recoveredSend(row) { return .recovered(sent) }
            return .inFlight
        }
        var headers: [(name: String, value: String)] = []
        if let text = row[7], case .array(let pairs)? = try? JSONParser.parse(Array(text.utf8)) {
            for pair in pairs {
                if case .array(let parts) = pair, parts.count == 2, let name = parts[0].stringValue, let value = parts[1].stringValue {
                    headers.append((name, value))
                }
            }
        }
        return .done(IdempotentAnswer(
            apnsID: row[2], status: row[3].flatMap { Int($0) }, reason: row[4], attempts: row[5].flatMap { Int($0) } ?? 0,
            httpStatus: row[6].flatMap { Int($0) } ?? 200, headers: headers, body: Array((row[8] ?? "").utf8)))
    }

    /// The audit row ``readSQL`` joined to an `in_flight` key, if any.
    static func recoveredSend(_ row: [String?]) -> IdempotencyRecoveredSend? {
        guard row.count >= 20, let owner = row[9], let apnsID = row[10], let outcome = row[11] else { return nil }
        return IdempotencyRecoveredSend(
            owner: owner, apnsID: apnsID, outcome: outcome, status: row[12].flatMap { Int($0) }, reason: row[13], errorType: row[14],
            attempts: row[15].flatMap { Int($0) } ?? 0, latencyMilliseconds: row[16].flatMap { Double($0) } ?? 0, retried: row[17] == "t",
            trapIDs: (row[18] ?? "").split(separator: ",").map(String.init), apnsUniqueID: row[19],
            unregisteredAt: row.count > 20 ? row[20].flatMap { Int64($0) } : nil)
    }

    /// Runs `body` on the store's queue with a pooled connection.
    private func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try self.withConnection(body) })
            }
        }
    }

    /// A pooled connection the server closed since (a Postgres restart) fails
    /// its statement: the statement is run once more on a new connection.
    /// Each statement is safe to run twice (a claim finds its own row).
    private func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        if let pooled = idle.withLock({ $0.popLast() }) {
            do {
                return try run(body, on: pooled)
            } catch where !pooled.isHealthy && !((error as? PostgresError)?.timedOut ?? false) {
                // Fall through to a fresh connection. Not after a timeout:
                // Postgres did not answer, and a second wait would double it.
            }
        }
        return try run(body, on: PostgresConnection(conninfo: conninfo, logger: logger, bound: bound))
    }

    private func run<T>(_ body: (PostgresConnection) throws -> T, on connection: PostgresConnection) throws -> T {
        do {
            let result = try body(connection)
            keep(connection)
            return result
        } catch {
            if connection.isHealthy {
                connection.rollbackIfNeeded()
                keep(connection)
            }
            throw error
        }
    }

    private func keep(_ connection: PostgresConnection) {
        guard connection.isHealthy else { return }
        idle.withLock { if $0.count < Self.idleLimit { $0.append(connection) } }
    }
}
