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
    /// The series every send records, cached (``SendSeries``).
    let series: SendSeries
    /// What the scrape-time gauges and counters remember between scrapes.
    let scrape: ScrapeState

    public init(
        registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
        logLinesDropped: @escaping @Sendable () -> Int = { LogSink.standardError.linesDropped }
    ) {
        self.registry = registry
        series = SendSeries(registry: registry)
        scrape = ScrapeState(logLinesDropped: logLinesDropped)
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

    /// For the HTTP/2 transport's observer: one connection event (the counter is by event only).
    public func connectionEvent(_ event: String) {
        counter(MetricCatalog.connectionEventsTotal, ConnectionEventLabels(event: event)).increment()
    }

    /// A send answered from its Idempotency-Key's first answer (nothing sent).
    public func idempotentReplay(app: String) {
        counter(MetricCatalog.idempotentReplaysTotal, AppLabels(app: app)).increment()
    }

    /// For the JWT caches' mint callback.
    public func jwtMinted(app: String, issuedAt: Int64) {
        counter(MetricCatalog.jwtMintsTotal, AppLabels(app: app)).increment()
        scrape.jwtIssuedAt.withLock { $0[app] = issuedAt }
    }

    /// Spans the OTLP export lost (`queue_full` or `export_failed`); 0 makes the series exist.
    public func spansDropped(reason: String, count: Int) {
        counter(MetricCatalog.spansDroppedTotal, ReasonLabels(reason: reason)).increment(by: Int64(count))
    }
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
    /// Connections the HTTP/2 APNs ingress refused at accept since start-up,
    /// by reason; empty when it is off.
    public var apnsIngressConnectionsRefused: @Sendable () -> [String: Int] = { [:] }

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
    /// Connects and statements Postgres did not answer within `audit.postgres_timeout_ms`.
    public var postgresTimeouts = 0
    /// Seconds the oldest journal record has waited for its `fdatasync` (0 when all are synced).
    public var journalUnsyncedSeconds = 0.0

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
