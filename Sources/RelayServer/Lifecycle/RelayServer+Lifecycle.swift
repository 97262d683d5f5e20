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
/// (``RelayServer/parts``), the signals (`gracefulShutdownSignals`) and the
/// bound on the whole drain (`maximumGracefulShutdownDuration`) are the
/// library's, and a part that fails while the relay serves shuts the others
/// down in the same order (`failureTerminationBehavior:
/// .gracefullyShutdownGroup`) and ends the group with its error.
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

    /// The parts in the order ServiceGroup starts them; it shuts them down in
    /// reverse, so the drain runs bottom to top:
    ///
    /// 1. ingress listener: intake stops (new connections refused, 503
    ///    `Draining` on open ones, `/readyz` 503), the
    ///    requests in flight finish within the drain timeout; the APNs pools
    ///    close shortly before it ends so running sends end with a result.
    /// 2. APNs pool: closed (in-flight streams get 5 s; after the cut-off there are none).
    /// 3. idempotency purge (with an audit database): its loop ends.
    /// 4. audit writer: waits for the relay's sends to publish their events,
    ///    then writes every journaled row to Postgres or the spool.
    /// 5. metrics listener: stopped.
    /// 6. trace exporter (`tracing.exporter: otlp`): what is queued, the
    ///    drain's own spans included, is exported within what is left of the
    ///    drain timeout, 1 s at least.
    ///
    /// The parts hold the relay's handles, not the relay itself.
    func parts(clock drain: DrainClock, started: @escaping @Sendable () -> Void) -> [RelayPart] {
        let (ingressServer, metricsServer, ingress, transport, service, audit, purge, logger) =
            (ingressServer, metricsServer, ingress, transport, service, audit, purge, logger)
        let apnsIngressServer = apnsIngressServer
        let drainTimeout = configuration.drainTimeoutSeconds
        let sendDeadline = configuration.apns.sendDeadlineSeconds
        func part(_ name: String, _ body: RelayPart.Body) -> RelayPart {
            RelayPart(name: name, body: body, logger: logger, started: started)
        }
        var parts: [RelayPart] = []
        if tracing.exporter != nil {
            let tracing = tracing
            parts.append(part("trace exporter", .stoppedBy {
                await tracing.shutdown(within: max(1, drainTimeout - drain.elapsed))
            }))
        }
        parts.append(part("metrics listener", .stoppedBy {
            await metricsServer.stop(drainTimeout: 1)
        }))
        parts.append(part("audit writer", .stoppedBy {
            // Sends cut off by the pool's close finish with a failure and
            // journal their row; the writer stays open until each one has. A
            // send still stuck past its own deadline (or past the drain's
            // bound) loses nothing either: its intent is in the journal and
            // the next start records it (outcome `unknown`), or its
            // completion is journaled whenever it ends.
            let clock = ContinuousClock()
            let deadline = min(clock.now + .seconds(sendDeadline + 5), drain.start + .seconds(drainTimeout + 5))
            while service.sendsInFlight > 0, clock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
            }
            if service.sendsInFlight > 0 {
                logger.error("sends still running when the audit writer stopped; their rows stay in the journal for the next start", metadata: ["sends": "\(service.sendsInFlight)"])
            }
            let unsettled = ingress.stopSettlingKeys()
            if unsettled > 0 {
                logger.warning("idempotency answers the store never took; repeats of their keys are answered from the audit rows", metadata: ["keys": "\(unsettled)"])
            }
            await audit.shutdown()
            let statistics = audit.statistics
            logger.notice("drained", metadata: [
                "audit_written": "\(statistics.written)", "audit_spooled": "\(statistics.spooled)",
                "audit_quarantined": "\(statistics.quarantined)", "audit_dropped": "\(statistics.dropped)",
            ])
        }))
        if let purge {
            // After the audit writer: shut down before it, with nothing to flush.
            parts.append(part("idempotency purge", .service(purge, within: { 1 })))
        }
        parts.append(part("APNs pool", .stoppedBy {
            await transport.close(drainTimeout: 5)
        }))
        parts.append(part("ingress listener", .stoppedBy {
            drain.begin()
            logger.notice("draining: intake stopped", metadata: ["in_flight": "\(ingress.requestsInFlight)"])
            // Batches go on starting sends for the first half of the drain
            // timeout and answer the rest NotSent; at the end the APNs
            // connections close so every running send ends with a result its
            // request can still report (per item, for a batch) before the
            // server's blanket 503.
            ingress.beginDraining(batchesStartFor: drainTimeout / 2)
            let cutOff = Task {
                try? await Task.sleep(for: .milliseconds(Int((drainTimeout - min(2, drainTimeout / 5)) * 1000)))
                if !Task.isCancelled { await transport.close(drainTimeout: 0) }
            }
            await ingressServer.stop(drainTimeout: drainTimeout)
            if let apnsIngressServer {
                // Its requests pass the same concurrency count: once none is
                // left every stream has its answer, and GOAWAY closes the rest.
                let clock = ContinuousClock()
                let deadline = drain.start + .seconds(drainTimeout)
                while ingress.requestsInFlight > 0, clock.now < deadline { try? await Task.sleep(for: .milliseconds(5)) }
                apnsIngressServer.stop()
            }
            cutOff.cancel()
            await cutOff.value
        }))
        return parts
    }

    /// Waits until the relay has drained (after SIGTERM or SIGINT when it was
    /// made with `drainingOnSignals`, or ``drain()``), or a part failed.
    ///
    /// - Throws: ``RelayPartFailure`` naming the part that failed, ended on
    ///   its own, or did not stop within the drain's bound; the others were
    ///   drained in order first. Already logged.
    public func run() async throws {
        try await lifecycle.run()
    }

    /// SIGTERM's work, for callers without signals (tests, `demo`): the
    /// group's graceful shutdown, each part in turn (see ``parts``).
    /// Returns when every part has stopped; at once when the relay has
    /// already drained. A part's failure is logged, not thrown.
    public func drain() async {
        await lifecycle.drain()
    }

    /// The group of `parts`, shut down in reverse of their order. A part that
    /// fails, or ends, while the relay serves shuts the others down in order
    /// (`.gracefullyShutdownGroup`) and the group ends with its error; the
    /// whole drain may take `drainTimeout + margin` seconds, then the part
    /// still stopping is cancelled (``RelayPart`` abandons it).
    static func group(
        _ parts: [RelayPart], signals: Bool, drainTimeout: Double, margin: Double = drainMargin, logger: Logger
    ) -> RelayPartGroup {
        let failures = RelayPartGroup.Failures()
        let services = parts.map { part in
            ServiceGroupConfiguration.ServiceConfiguration(
                service: RelayPartGroup.Recorded(part: part, failures: failures),
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

/// The relay's running group, started once at the end of ``RelayServer``'s init.
final class RelayLifecycle: Sendable {
    private let state = Mutex<(group: RelayPartGroup, running: Task<Result<Void, any Error>, Never>)?>(nil)

    /// Starts the group of `parts` and returns once every part runs (so a
    /// signal that arrives after the listeners' ports are printed drains the relay).
    func start(
        signals: Bool, drainTimeout: Double, logger: Logger, parts makeParts: (_ started: @escaping @Sendable () -> Void) -> [RelayPart]
    ) async {
        let (started, startedContinuation) = AsyncStream<Void>.makeStream()
        let parts = makeParts { startedContinuation.yield() }
        let group = RelayServer.group(parts, signals: signals, drainTimeout: drainTimeout, logger: logger)
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
        state.withLock { $0 = (group, running) }
        var count = 0
        for await _ in started {
            count += 1
            if count == parts.count { break }
        }
    }

    func run() async throws {
        guard let (group, running) = state.withLock({ $0 }) else { return }
        let result = await withTaskCancellationHandler {
            await running.value
        } onCancel: {
            Task { await group.triggerGracefulShutdown() }
        }
        try result.get()
    }

    func drain() async {
        guard let (group, running) = state.withLock({ $0 }) else { return }
        await group.triggerGracefulShutdown()
        _ = await running.value
    }
}

/// The relay's ServiceGroup and what its parts reported.
///
/// The part that failed is recorded here as well as thrown: once the drain's
/// bound has cancelled the group, ServiceGroup may end without the error of
/// the part it was waiting for (another part's end can arrive first and the
/// rest are discarded), and the process must still exit 1 naming it.
struct RelayPartGroup: Sendable {
    let group: ServiceGroup
    let failures: Failures

    final class Failures: Sendable {
        private let recorded = Mutex<[RelayPartFailure]>([])
        func record(_ failure: RelayPartFailure) { recorded.withLock { $0.append(failure) } }
        var first: RelayPartFailure? { recorded.withLock { $0.first } }
    }

    /// A part that records its failure before the group sees it.
    struct Recorded: Service, CustomStringConvertible {
        let part: RelayPart
        let failures: Failures
        var description: String { part.name }

        func run() async throws {
            do {
                try await part.run()
            } catch let failure as RelayPartFailure {
                failures.record(failure)
                throw failure
            }
        }
    }

    /// Runs the group to its end; throws the first part's failure.
    func run() async throws {
        do {
            try await group.run()
        } catch {
            throw failures.first ?? error
        }
        if let failure = failures.first { throw failure }
    }

    func triggerGracefulShutdown() async {
        await group.triggerGracefulShutdown()
    }
}

/// When the drain began (the ingress listener's stop, the first), so later
/// parts know what is left of the drain timeout.
final class DrainClock: Sendable {
    private let began = Mutex<ContinuousClock.Instant?>(nil)

    func begin() {
        began.withLock { if $0 == nil { $0 = .now } }
    }

    /// When the drain began; now, if it has not (a part failed before the ingress stopped).
    var start: ContinuousClock.Instant {
        began.withLock { began in
            if began == nil { began = .now }
            return began!
        }
    }

    var elapsed: Double { (ContinuousClock.now - start).seconds }
}
