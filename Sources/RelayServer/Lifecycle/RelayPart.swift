import Logging
import ServiceLifecycle

/// One part of the relay with a lifetime (a listener, the APNs pool, the
/// audit writer, the trace exporter) as a swift-service-lifecycle `Service`,
/// so one `ServiceGroup` runs them all and shuts them down in order
/// (``RelayServer`` lists them; the group stops them in reverse).
///
/// Its `run()` lives until the group's graceful shutdown reaches this part,
/// then does the part's share of the drain and returns. It throws
/// ``RelayPartFailure`` when the part fails or ends on its own while the
/// relay runs, or when its share of the drain is still going when the
/// group's bound (`maximumGracefulShutdownDuration`) cancels it: the group
/// then ends with that error and `serve` exits 1.
struct RelayPart: Service, CustomStringConvertible {
    enum Body: Sendable {
        /// Nothing to run while the relay serves (libmicrohttpd, the pool and
        /// the audit writer run on threads of their own and report no
        /// failure); `stop` is the part's share of the drain.
        case stoppedBy(@Sendable () async -> Void)
        /// A lifecycle service of its own (none today; swift-otel's exporter was one): it runs for
        /// the relay's life and shuts itself down (its flush) when the
        /// graceful shutdown reaches this part, given `within` seconds, then
        /// cancelled.
        case service(any Service, within: @Sendable () -> Double)
    }

    /// The part's name in logs and errors ("ingress listener").
    let name: String
    let body: Body
    let logger: Logger
    /// Called once `run()` starts: the group is running, its signal handlers are in place.
    let started: @Sendable () -> Void

    var description: String { name }

    func run() async throws {
        started()
        switch body {
        case .stoppedBy(let stop):
            do {
                try await gracefulShutdown()
            } catch {
                // Cancelled before its turn: the drain ran past its bound on
                // an earlier part. What this part would have done is left
                // (rows stay in the journal, spans in the queue); the process exits.
                logger.error("not stopped in order: the drain passed its bound before this part's turn", metadata: ["part": "\(name)"])
                return
            }
            guard await Self.finishesUnlessCancelled(stop) else {
                logger.error("did not stop within the drain's bound; abandoned", metadata: ["part": "\(name)"])
                throw RelayPartFailure(part: name, reason: "did not stop within the drain's bound")
            }
        case .service(let service, let within):
            try await runService(service, within: within)
        }
    }

    /// Runs `service` (in a child task, so it sees the same graceful
    /// shutdown), and cancels it `within()` seconds after the graceful
    /// shutdown reached it, as when the group's bound cancels this part.
    private func runService(_ service: any Service, within: @escaping @Sendable () -> Double) async throws {
        enum Ended: Sendable { case service(Result<Void, any Error>), timeUp }
        let name = name
        let ended: Ended = await withTaskGroup(of: Ended.self) { group in
            group.addTask {
                do { try await service.run(); return .service(.success(())) } catch { return .service(.failure(error)) }
            }
            group.addTask {
                // Throws only when this part is cancelled; the service sees that too.
                guard (try? await gracefulShutdown()) != nil else { return .timeUp }
                try? await Task.sleep(for: .milliseconds(Int(max(0.1, within()) * 1000)))
                return .timeUp
            }
            var first = await group.next()!
            if case .timeUp = first {
                group.cancelAll()
                // The service's own end, now that it is cancelled.
                if case .service(.failure(let error))? = await group.next(), !(error is CancellationError) {
                    first = .service(.failure(error))
                }
            }
            group.cancelAll()
            return first
        }
        switch ended {
        case .timeUp:
            logger.warning("did not finish within the drain's time; what it still held is dropped", metadata: ["part": "\(name)"])
        case .service(.success):
            guard Task.isShuttingDownGracefully || Task.isCancelled else {
                logger.critical("ended on its own while the relay was serving", metadata: ["part": "\(name)"])
                throw RelayPartFailure(part: name, reason: "ended on its own while the relay was serving")
            }
        case .service(.failure(let error)):
            if error is CancellationError { return }
            logger.critical("a part of the relay failed", metadata: ["part": "\(name)", "error": "\(error)"])
            throw RelayPartFailure(part: name, reason: "failed: \(error)")
        }
    }

    /// Runs `work` to its end, or until the calling task is cancelled,
    /// whichever comes first; true when it ended. The work itself (a thread
    /// join, libmicrohttpd's stop) cannot be cancelled: when abandoned it
    /// goes on in the background while the process exits.
    static func finishesUnlessCancelled(_ work: @escaping @Sendable () async -> Void) async -> Bool {
        let (stream, continuation) = AsyncStream<Void>.makeStream()
        Task {
            await work()
            continuation.yield()
            continuation.finish()
        }
        // An AsyncStream's iteration ends (nil) when the waiting task is cancelled.
        for await _ in stream { return true }
        return false
    }
}

/// A part of the relay failed, ended on its own, or did not stop within
/// the drain's bound; `serve` exits 1 after logging it.
public struct RelayPartFailure: Error, Sendable, CustomStringConvertible {
    /// The part's name ("ingress listener", "audit writer", "trace exporter", …).
    public let part: String
    public let reason: String
    public var description: String { "the \(part) \(reason)" }
}
