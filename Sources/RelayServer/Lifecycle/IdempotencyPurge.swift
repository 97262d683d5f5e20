import Audit
import Logging
import ServiceLifecycle

/// Deletes expired `Idempotency-Key`s now and then: one of the relay's parts,
/// so it runs only while the relay does. (It used to start in
/// ``RelayServer``'s initializer, and a start that failed after it, a port in
/// use, left it purging for a relay that never served.)
struct IdempotencyPurge: RelayPart {
    let name = "idempotency purge"
    let store: PostgresIdempotencyStore
    /// Seconds between rounds (60 in production).
    let interval: Double
    let logger: Logger

    /// Nothing outlives `run()`: its loop ends when the graceful shutdown reaches it.
    func stop() async {}

    /// Rounds until the graceful shutdown. Bounded: statements of at most
    /// 1000 rows, at most 100 per round, so no statement holds the table long.
    ///
    /// A statement in flight is not waited for once the shutdown (or the
    /// drain's bound) cancels the round: it may wait on a silent Postgres up
    /// to `audit.postgres_timeout_ms`, and `ServiceGroup` gives a cancelled
    /// part 2 s before it ends the process with a crash. It finishes, or
    /// times out, on the store's queue.
    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Int(interval * 1000)))
                do {
                    for _ in 0..<100 where !Task.isCancelled {
                        let store = store
                        guard try await valueUnlessCancelled({ try await store.purgeExpired(limit: 1000) }) == 1000 else { break }
                    }
                } catch {
                    logger.warning("expired idempotency keys could not be purged", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}
