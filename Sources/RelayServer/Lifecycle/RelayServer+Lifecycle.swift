import Logging
import RelayBasics
import ServiceLifecycle
import Synchronization

/// The relay's parts under one swift-service-lifecycle `ServiceGroup`.
///
/// Why one group with its parts listed in order, rather than parts that wait
/// for each other: the drain's order is strict (intake stops before the pool
/// closes, the pool before the audit writer flushes, the exporter last, so
/// the spans of the drain itself are exported), and a `ServiceGroup` already
/// shuts its services down one at a time in the reverse of their listing,
/// each after the one before has returned. The order is then one list
/// (``RelayComponents/parts``), the signals (`gracefulShutdownSignals`) and the
/// bound on the whole drain (`maximumGracefulShutdownDuration`) are the
/// library's, and a part that fails while the relay serves shuts the others
/// down in the same order (`failureTerminationBehavior:
/// .gracefullyShutdownGroup`) and ends the group with its error.
///
/// Starting is not the group's: a `ServiceGroup` runs its services'
/// `run()` concurrently, in no set order, and cannot say when each has
/// started. The parts start before it, one at a time (``startParts(_:)``).
extension RelayServer {
    /// The time the whole drain may take beyond `shutdown.drain_timeout_seconds`:
    /// the pool's close, the audit's flush, the last export and the metrics
    /// listener's stop. Past it the group cancels the part still stopping
    /// (abandoned, named in an error log, `serve` exits 1); rows it did not
    /// write stay in the journal for the next start. Deployments give the
    /// process 40 s to the default 25 s drain (deploy/), above 25 + 10.
    public static let drainMargin: Double = 10

    /// How long cancelled parts may take to return before ServiceGroup
    /// gives up on the process (a crash: the bound holds even then).
    static let cancellationMargin: Double = 2

    /// Starts `parts` one at a time, in order. When one cannot start, those
    /// started before it are undone, last first, and its error is thrown:
    /// a failed start leaves nothing running, and no part after it starts.
    static func startParts(_ parts: [any RelayPart]) async throws {
        var started: [any RelayPart] = []
        do {
            for part in parts {
                try await part.start()
                started.append(part)
            }
        } catch {
            for part in started.reversed() { await part.undoStart() }
            throw error
        }
    }

    /// The group of `parts`, shut down in reverse of their order. A part that
    /// fails, or ends, while the relay serves shuts the others down in order
    /// (`.gracefullyShutdownGroup`) and the group ends with its error; the
    /// whole drain may take `drainTimeout + margin` seconds, then the part
    /// still stopping is cancelled (``RelayPart`` abandons it).
    /// `started` is called as each part's `run()` begins.
    static func group(
        _ parts: [any RelayPart], signals: Bool, drainTimeout: Double, margin: Double = drainMargin, logger: Logger,
        started: @escaping @Sendable () -> Void = {}
    ) -> RelayPartGroup {
        let failures = RelayPartGroup.Failures()
        let services = parts.map { part in
            ServiceGroupConfiguration.ServiceConfiguration(
                service: RelayPartGroup.Member(part: part, failures: failures, started: started),
                successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup,
                serviceName: part.name)
        }
        var configuration = ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: signals ? [.sigterm, .sigint] : [], logger: logger)
        configuration.maximumGracefulShutdownDuration = .seconds(drainTimeout + margin)
        configuration.maximumCancellationDuration = .seconds(cancellationMargin)
        return RelayPartGroup(group: ServiceGroup(configuration: configuration), failures: failures)
    }
}

/// The relay's running group, once its parts have started.
final class RelayLifecycle: Sendable {
    let group: RelayPartGroup
    let running: Task<Result<Void, any Error>, Never>

    private init(group: RelayPartGroup, running: Task<Result<Void, any Error>, Never>) {
        self.group = group
        self.running = running
    }

    /// Runs the group of `parts` (started already) and returns once every
    /// part runs, so a signal that arrives after the listeners' ports are
    /// printed drains the relay.
    static func run(_ parts: [any RelayPart], signals: Bool, drainTimeout: Double, logger: Logger) async -> RelayLifecycle {
        let (started, startedContinuation) = AsyncStream<Void>.makeStream()
        let group = RelayServer.group(parts, signals: signals, drainTimeout: drainTimeout, logger: logger) { startedContinuation.yield() }
        let running = Task { () -> Result<Void, any Error> in
            do {
                try await group.run()
                return .success(())
            } catch {
                logger.critical("apns-relay stopped: a part failed", metadata: [
                    "part": "\((error as? RelayPartFailure)?.part ?? "unknown")", "error": "\(error)",
                ])
                startedContinuation.finish()
                return .failure(error)
            }
        }
        var count = 0
        for await _ in started {
            count += 1
            if count == parts.count { break }
        }
        return RelayLifecycle(group: group, running: running)
    }

    /// Until the group has ended; cancelling the caller drains the relay.
    func run() async throws {
        let (group, running) = (group, running)
        let result = await withTaskCancellationHandler {
            await running.value
        } onCancel: {
            Task { await group.triggerGracefulShutdown() }
        }
        try result.get()
    }

    /// The group's graceful shutdown; returns once it has ended.
    func drain() async {
        await group.triggerGracefulShutdown()
        _ = await running.value
    }
}
