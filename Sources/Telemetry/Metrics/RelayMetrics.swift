import APNs
public import Prometheus
public import Relay
import Synchronization
import RelayBasics

/// Turns the relay's events into Prometheus metrics.
///
/// Every series is made from its declaration in `MetricCatalog` (name, HELP,
/// label set, buckets) on the swift-prometheus registry directly: `promtool
/// check metrics` requires HELP text, which swift-metrics has no way to pass.
public final class RelayMetrics: RelayObserver, Sendable {
    public let registry: PrometheusCollectorRegistry
    private let jwtIssuedAt = Mutex<[String: Int64]>([:])

    public init(
        registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
        logLinesDropped: @escaping @Sendable () -> Int = { LogSink.standardError.linesDropped }
    ) {
        self.registry = registry
        self.logLinesDropped = logLinesDropped
        attempts = SeriesCache { Self.counter(MetricCatalog.attemptsTotal, $0, in: registry) }
        attemptDurations = SeriesCache { Self.histogram(MetricCatalog.attemptDuration, $0, in: registry) }
        retries = SeriesCache { Self.counter(MetricCatalog.retriesTotal, $0, in: registry) }
        sends = SeriesCache { Self.counter(MetricCatalog.sendsTotal, $0, in: registry) }
        sendDurations = SeriesCache { Self.histogram(MetricCatalog.sendDuration, $0, in: registry) }
        trapHits = SeriesCache { Self.counter(MetricCatalog.trapHitsTotal, $0, in: registry) }
        ingressSeries = SeriesCache { key in
            IngressSeries(
                requests: Self.counter(MetricCatalog.ingressRequestsTotal, IngressRequestLabels(route: key.route, code: String(key.status)), in: registry),
                durations: Self.histogram(MetricCatalog.ingressRequestDuration, RouteLabels(route: key.route), in: registry))
        }
    }

    /// The series of `definition` with `labels`, created on first use.
    func counter<Labels>(_ definition: CounterDefinition<Labels>, _ labels: Labels) -> Counter {
        Self.counter(definition, labels, in: registry)
    }

    static func counter<Labels>(_ definition: CounterDefinition<Labels>, _ labels: Labels, in registry: PrometheusCollectorRegistry) -> Counter {
        registry.makeCounter(descriptor: definition.declaration.descriptor, labels: labels.pairs)
    }

    /// The one series of an unlabelled metric.
    func counter(_ definition: CounterDefinition<NoLabels>) -> Counter {
        registry.makeCounter(descriptor: definition.declaration.descriptor)
    }

    func gauge<Labels>(_ definition: GaugeDefinition<Labels>, _ labels: Labels) -> Gauge {
        registry.makeGauge(descriptor: definition.declaration.descriptor, labels: labels.pairs)
    }

    func gauge(_ definition: GaugeDefinition<NoLabels>) -> Gauge {
        registry.makeGauge(descriptor: definition.declaration.descriptor)
    }

    func histogram<Labels>(_ definition: HistogramDefinition<Labels>, _ labels: Labels) -> ValueHistogram {
        Self.histogram(definition, labels, in: registry)
    }

    static func histogram<Labels>(_ definition: HistogramDefinition<Labels>, _ labels: Labels, in registry: PrometheusCollectorRegistry) -> ValueHistogram {
        let declaration = definition.declaration
        return registry.makeValueHistogram(descriptor: declaration.descriptor, labels: labels.pairs, buckets: declaration.buckets)
    }

    /// A bounded label value for a reason: catalog reasons and the relay's own
    /// error types pass; anything else (a reason newer than the catalog) is `other`.
    ///
    /// A `transport_` reason passes only when it names one of the relay's
    /// transport kinds: APNs' own reason text is kept verbatim when the
    /// catalog does not know it, so an APNs answering
    /// `{"reason":"transport_<anything>"}` made a new series per answer.
    static func reasonLabel(_ reason: String?) -> String {
        guard let reason else { return "none" }
        return knownReasons.contains(reason) ? reason : "other"
    }

    /// Every `error_type` a send can fail with, derived from the error types
    /// themselves (``SendFailure/knownErrorTypes``), so each refusal the relay
    /// can answer counts under its own name; only an APNs reason newer than
    /// the catalog is `other`.
    private static let knownReasons = SendFailure.knownErrorTypes

    /// `2xx` for 200: the attempt's status class label.
    static func statusClass(_ status: Int?) -> String {
        guard let status else { return "transport" }
        let index = status / 100 - 1
        return statusClasses.indices.contains(index) ? statusClasses[index] : "\(status / 100)xx"
    }

    /// Made once: every attempt reads one (an array literal here was an allocation per attempt).
    private static let statusClasses = ["1xx", "2xx", "3xx", "4xx", "5xx"]

    // The series every send records, kept per label set: swift-prometheus
    // looks a series up by name and labels under its lock (and checks the
    // name and HELP text) on every `make…` call. Each cache is bound to its
    // declaration in `init`.
    private let attempts: SeriesCache<AttemptLabels, Counter>
    private let attemptDurations: SeriesCache<OperationLabels, ValueHistogram>
    private let retries: SeriesCache<RetryLabels, Counter>
    private let sends: SeriesCache<SendLabels, Counter>
    private let sendDurations: SeriesCache<OperationLabels, ValueHistogram>
    private let trapHits: SeriesCache<TrapHitLabels, Counter>
    /// Both series of an answered request by route and status, found by one
    /// lookup keyed by the status as a number (no label structs, no status
    /// text per request). The registry hands out one series per label set,
    /// so the histogram a route shares across its statuses is one object.
    private let ingressSeries: SeriesCache<IngressSeriesKey, IngressSeries>

    public func attemptFinished(_ event: AttemptEvent) {
        let operation = event.send.operation.rawValue
        attempts.series(AttemptLabels(app: event.send.app, operation: operation, statusClass: Self.statusClass(event.status))).increment()
        attemptDurations.series(OperationLabels(operation: operation)).record(event.durationSeconds)
        if !event.isFinalAttempt {
            retries.series(RetryLabels(operation: operation, reason: Self.reasonLabel(event.reason ?? event.errorType))).increment()
        }
    }

    public func sendFinished(_ event: SendEvent) {
        let operation = event.send.operation.rawValue
        sends.series(SendLabels(
            app: event.send.app, operation: operation, outcome: event.outcome.rawValue,
            reason: Self.reasonLabel(event.reason ?? event.errorType))).increment()
        sendDurations.series(OperationLabels(operation: operation)).record(event.latencySeconds)
        // One definition of a trap hit (docs/api.md#trap-hits): a send hits a
        // trap when its preflight or any of its attempts maps to it, counted once
        // per send. The audit's trap_ids and the answer's trapHits are this same
        // list, so the metric and `count(*) ... WHERE trap = ANY(trap_ids)` agree;
        // a 429 that a retry got past still shows (MS015).
        for trap in event.trapHits {
            trapHits.series(TrapHitLabels(trap: trap.rawValue, operation: operation)).increment()
        }
    }

    /// For the HTTP/2 transport's observer: one connection event (the counter is by event only).
    public func connectionEvent(_ event: String) {
        counter(MetricCatalog.connectionEventsTotal, ConnectionEventLabels(event: event)).increment()
    }

    /// For the ingress: one answered request.
    public func ingressRequest(route: String, status: Int, seconds: Double) {
        let series = ingressSeries.series(IngressSeriesKey(route: route, status: status))
        series.requests.increment()
        series.durations.record(seconds)
    }

    /// A send answered from its Idempotency-Key's first answer (nothing sent).
    public func idempotentReplay(app: String) {
        counter(MetricCatalog.idempotentReplaysTotal, AppLabels(app: app)).increment()
    }

    /// For the JWT caches' mint callback.
    public func jwtMinted(app: String, issuedAt: Int64) {
        counter(MetricCatalog.jwtMintsTotal, AppLabels(app: app)).increment()
        jwtIssuedAt.withLock { $0[app] = issuedAt }
    }

    /// Spans the OTLP export lost (`queue_full` or `export_failed`); 0 makes the series exist.
    public func spansDropped(reason: String, count: Int) {
        counter(MetricCatalog.spansDroppedTotal, SpanDropLabels(reason: reason)).increment(by: Int64(count))
    }

    /// Refreshes the gauges that are read, not counted, just before a scrape.
    public func refresh(_ sources: MetricSources) {
        let now = UnixTime.nowSeconds()
        for (app, issuedAt) in jwtIssuedAt.withLock({ $0 }) {
            gauge(MetricCatalog.jwtAge, AppLabels(app: app)).set(to: Double(now - issuedAt))
        }
        if let skew = sources.clockSkewSeconds() { gauge(MetricCatalog.clockSkew).set(to: Double(skew)) }
        gauge(MetricCatalog.retryDisabled).set(to: sources.retryDisabled() ? 1 : 0)
        gauge(MetricCatalog.inflightStreams).set(to: Double(sources.inflightStreams()))
        // Every state is written each scrape so a state that emptied reads 0, not its last value.
        let states = sources.connections()
        for origin in Set(states.map(\.origin)).union(knownOrigins.withLock { $0 }) {
            knownOrigins.withLock { _ = $0.insert(origin) }
            for state in ["connecting", "ready", "going_away"] {
                let count = states.first { $0.origin == origin && $0.state == state }?.count ?? 0
                gauge(MetricCatalog.connections, ConnectionLabels(origin: origin, state: state)).set(to: Double(count))
            }
        }
        if let ingress = sources.ingressInFlight() { gauge(MetricCatalog.ingressInflightRequests).set(to: Double(ingress)) }
        if let admitted = sources.ingressSendsAdmitted() { gauge(MetricCatalog.ingressSendsAdmitted).set(to: Double(admitted)) }
        if let running = sources.ingressBatchSendsRunning() { gauge(MetricCatalog.ingressBatchSendsRunning).set(to: Double(running)) }
        for (reason, total) in sources.ingressNotSent() {
            let counter = counter(MetricCatalog.batchSendsNotSentTotal, NotSentLabels(reason: reason))
            notSentTotals.withLock { seen in
                let delta = total - seen[reason, default: 0]
                if delta > 0 { counter.increment(by: Int64(delta)) }
                seen[reason] = max(seen[reason, default: 0], total)
            }
        }
        if let total = sources.ingressRequestsTimedOut() {
            let counter = counter(MetricCatalog.ingressRequestsTimedOutTotal)
            timedOutTotal.withLock { seen in
                if total > seen { counter.increment(by: Int64(total - seen)) }
                seen = max(seen, total)
            }
        }
        if let audit = sources.audit() {
            gauge(MetricCatalog.auditQueueDepth).set(to: Double(audit.queueDepth))
            gauge(MetricCatalog.auditSpoolBytes).set(to: Double(audit.spoolBytes))
            gauge(MetricCatalog.auditConnected).set(to: audit.connected ? 1 : 0)
            gauge(MetricCatalog.auditBehind).set(to: audit.behindSeconds)
            for (result, total) in [
                ("written", audit.written), ("spooled", audit.spooled), ("replayed", audit.replayed), ("dropped", audit.dropped),
                ("quarantined", audit.quarantined),
            ] {
                let counter = counter(MetricCatalog.auditRowsTotal, AuditRowLabels(result: result))
                auditTotals.withLock { seen in
                    let delta = total - seen[result, default: 0]
                    if delta > 0 { counter.increment(by: Int64(delta)) }
                    seen[result] = max(seen[result, default: 0], total)
                }
            }
        }
        let logDropped = logLinesDropped()
        let logCounter = counter(MetricCatalog.logLinesDroppedTotal)
        logDroppedTotal.withLock { seen in
            if logDropped > seen { logCounter.increment(by: Int64(logDropped - seen)) }
            seen = max(seen, logDropped)
        }
        process.update(self)
    }

    /// The process' log lines dropped so far (the standard error sink's; a
    /// test may read its own sink instead).
    private let logLinesDropped: @Sendable () -> Int
    private let logDroppedTotal = Mutex<Int>(0)
    private let process = ProcessMetrics()

    private let auditTotals = Mutex<[String: Int]>([:])
    private let notSentTotals = Mutex<[String: Int]>([:])
    private let timedOutTotal = Mutex<Int>(0)
    private let knownOrigins = Mutex<Set<String>>([])
}

/// Where scrape-time values come from; the executable wires each to its owner.
public struct MetricSources: Sendable {
    public var clockSkewSeconds: @Sendable () -> Int64?
    public var retryDisabled: @Sendable () -> Bool
    public var inflightStreams: @Sendable () -> Int
    public var audit: @Sendable () -> AuditSnapshot?
    /// Open APNs connections by origin and state.
    public var connections: @Sendable () -> [(origin: String, state: String, count: Int)]
    /// Ingress requests in progress, when an ingress runs.
    public var ingressInFlight: @Sendable () -> Int? = { nil }
    /// Sends the ingress admitted and has not finished.
    public var ingressSendsAdmitted: @Sendable () -> Int? = { nil }
    /// Batch sends running now.
    public var ingressBatchSendsRunning: @Sendable () -> Int? = { nil }
    /// Batch sends never started since start-up, by reason.
    public var ingressNotSent: @Sendable () -> [String: Int] = { [:] }
    /// Connections cut by the request deadline since start-up.
    public var ingressRequestsTimedOut: @Sendable () -> Int? = { nil }

    public init(
        clockSkewSeconds: @escaping @Sendable () -> Int64? = { nil }, retryDisabled: @escaping @Sendable () -> Bool = { false },
        inflightStreams: @escaping @Sendable () -> Int = { 0 }, audit: @escaping @Sendable () -> AuditSnapshot? = { nil },
        connections: @escaping @Sendable () -> [(origin: String, state: String, count: Int)] = { [] }
    ) {
        self.connections = connections
        self.clockSkewSeconds = clockSkewSeconds
        self.retryDisabled = retryDisabled
        self.inflightStreams = inflightStreams
        self.audit = audit
    }
}

/// The audit writer's state as metrics need it (Telemetry does not import Audit).
public struct AuditSnapshot: Sendable {
    public var queueDepth: Int
    public var spoolBytes: Int
    public var connected: Bool
    public var written: Int
    public var spooled: Int
    public var replayed: Int
    public var dropped: Int
    /// Rows Postgres refused for their data, kept in the quarantine file.
    public var quarantined = 0
    /// Seconds rows have been waiting for a configured Postgres (0 when caught up).
    public var behindSeconds = 0.0

    public init(queueDepth: Int, spoolBytes: Int, connected: Bool, written: Int, spooled: Int, replayed: Int, dropped: Int) {
        self.queueDepth = queueDepth
        self.spoolBytes = spoolBytes
        self.connected = connected
        self.written = written
        self.spooled = spooled
        self.replayed = replayed
        self.dropped = dropped
    }
}
