import Logging
import ServiceLifecycle

/// One long-running part of the relay (a listener, the APNs pool, the
/// audit writer, the idempotency purge, the trace exporter) as a
/// swift-service-lifecycle `Service`, so one `ServiceGroup` runs them all
/// and shuts them down in order (``RelayComponents/parts`` lists them; the
/// group stops them in reverse).
///
/// A part is built without side effects. ``start()`` starts what it runs
/// (binds its sockets, starts its threads), once, before the group runs:
/// the relay starts its parts one at a time, in order, and when one cannot
/// start, it undoes the starts before it (``undoStart()``), so a failed
/// start leaves nothing running (`RelayServer.startParts`). Its `run()`
/// lives until the group's graceful shutdown reaches this part, then does
/// the part's share of the drain (``stop()``) and returns. A part that
/// fails or ends on its own while the relay runs, or whose share of the
/// drain is still going when the group's bound
/// (`maximumGracefulShutdownDuration`) cancels it, ends the group with a
/// ``RelayPartFailure`` and `serve` exits 1.
protocol RelayPart: Service, CustomStringConvertible {
    /// The part's name in logs and errors ("ingress listener").
    var name: String { get }
    var logger: Logger { get }
    /// Starts what the part runs; throws ``ConfigurationError`` naming the
    /// setting when it cannot, having stopped whatever of it had started.
    /// Nothing by default: a part whose work starts in `run()` or on demand.
    func start() async throws
    /// Undoes ``start()`` when a part after it could not start (nothing was
    /// served). ``stop()`` by default.
    func undoStart() async
    /// The part's share of the drain. Runs to its end unless the drain's
    /// bound cancels the part first; it cannot itself be cancelled (a thread
    /// join, libmicrohttpd's stop).
    func stop() async
}

extension RelayPart {
    var description: String { name }

    func start() async throws {}

    func undoStart() async { await stop() }

    /// Waits for the group's graceful shutdown to reach this part, then
    /// stops it within the drain's bound.
    func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            // Cancelled before its turn: the drain ran past its bound on
            // an earlier part. What this part would have done is left
            // (rows stay in the journal, spans in the queue); the process exits.
            logger.error("not stopped in order: the drain passed its bound before this part's turn", metadata: ["part": "\(name)"])
            return
        }
        guard await finishesUnlessCancelled({ await self.stop() }) else {
            logger.error("did not stop within the drain's bound; abandoned", metadata: ["part": "\(name)"])
            throw RelayPartFailure(part: name, reason: "did not stop within the drain's bound")
        }
    }
}

/// Runs `work` to its end, or until the calling task is cancelled,
/// whichever comes first; true when it ended. The work itself cannot be
/// cancelled: when abandoned it goes on in the background while the process exits.
func finishesUnlessCancelled(_ work: @escaping @Sendable () async -> Void) async -> Bool {
    // Cannot throw: the work does not.
    (try? await valueUnlessCancelled { await work() }) != nil
}

/// `work`'s value, or nil once the calling task is cancelled, whichever comes
/// first. As with ``finishesUnlessCancelled(_:)`` the work itself goes on in
/// the background when abandoned: for a wait that is bounded, but longer
/// than the group's cancellation margin allows (a Postgres statement).
func valueUnlessCancelled<Value: Sendable>(_ work: @escaping @Sendable () async throws -> Value) async throws -> Value? {
    let (stream, continuation) = AsyncStream<Result<Value, any Error>>.makeStream()
    Task {
        do { continuation.yield(.success(try await work())) } catch { continuation.yield(.failure(error)) }
        continuation.finish()
    }
    for await result in stream { return try result.get() }
    return nil
}

/// A part of the relay failed, ended on its own, or did not stop within
/// the drain's bound; `serve` exits 1 after logging it.
public struct RelayPartFailure: Error, Sendable, CustomStringConvertible {
    /// The part's name ("ingress listener", "audit writer", "trace exporter", …).
    public let part: String
    public let reason: String
    public var description: String { "the \(part) \(reason)" }
}
