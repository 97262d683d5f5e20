import RelayBasics
import Synchronization

/// How long a ``PostgresConnection``'s caller may wait on Postgres.
///
/// A Postgres that stops answering without closing its connections (a table
/// locked by a long transaction, a frozen host, a network path that drops
/// packets) must not hold the relay: the audit writer would keep every row
/// in memory and report itself healthy, an idempotency-keyed send would
/// never be answered, and the drain would pass its bound. With a bound, the
/// connect and each statement end within it, in an error
/// (``PostgresError/timedOut``), and the connection is given up.
public struct PostgresWaitBound: Sendable {
    /// Seconds the connect, and then each statement, may wait. Postgres
    /// cancels a statement itself at this bound (`statement_timeout`, set on
    /// every bounded connection); the relay gives the connection up
    /// ``grace`` later if no answer came (a frozen server or network).
    public var seconds: Double
    /// An instant past which no wait goes on, whatever ``seconds`` leaves
    /// (the drain's end), read again while waiting; nil: none.
    public var cutoff: PostgresCutoff?

    /// How long after the server's own `statement_timeout` the relay waits
    /// for the cancel to arrive before it closes the connection itself.
    public static let grace = 1.0

    public init(seconds: Double, cutoff: PostgresCutoff? = nil) {
        self.seconds = seconds
        self.cutoff = cutoff
    }

    /// `statement_timeout`'s value: whole milliseconds, at least 1 (0 would
    /// turn the server's bound off).
    var statementTimeoutMilliseconds: Int { max(1, Int((seconds * 1000).rounded(.up))) }
}

/// An instant (``MonotonicClock``'s nanoseconds) past which a bounded
/// connection stops waiting on Postgres: set from another thread (the
/// drain), read by the waiting one between short polls.
public final class PostgresCutoff: Sendable {
    private let instant = Atomic<UInt64>(.max)

    public init() {}

    /// No wait goes on past `instant`.
    public func cut(at instant: UInt64) {
        self.instant.store(instant, ordering: .relaxed)
    }

    /// The instant, or `UInt64.max` when none is set.
    public var current: UInt64 { instant.load(ordering: .relaxed) }

    /// True once the cutoff has passed: start no new work on Postgres.
    public var hasPassed: Bool { MonotonicClock.now() >= current }
}
