import APNs
public import Prometheus
public import Relay
import Synchronization
import RelayBasics

/// Turns the relay's events into Prometheus metrics.
///
/// Metrics are created on the swift-prometheus registry directly, with HELP
/// text (`promtool check metrics` requires it, and swift-metrics has no way
/// to pass one); the exposition format is always swift-prometheus'.
public final class RelayMetrics: RelayObserver, Sendable {
    public let registry: PrometheusCollectorRegistry
    private let jwtIssuedAt = Mutex<[String: Int64]>([:])

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
    }

    func counter(_ name: String, _ labels: [(String, String)] = []) -> Counter {
        registry.makeCounter(name: name, labels: labels, help: MetricNames.help[name]!)
    }

    func gauge(_ name: String, _ labels: [(String, String)] = []) -> Gauge {
        registry.makeGauge(name: name, labels: labels, help: MetricNames.help[name]!)
    }

    func histogram(_ name: String, _ labels: [(String, String)]) -> ValueHistogram {
        registry.makeValueHistogram(name: name, labels: labels, buckets: MetricNames.latencyBuckets, help: MetricNames.help[name]!)
    }

    /// A bounded label value for a reason: catalog reasons and the relay's own
    /// error types pass; anything else (a reason newer than the catalog) is `other`.
    static func reasonLabel(_ reason: String?) -> String {
        guard let reason else { return "none" }
        if APNsReason.named(reason) != nil || reason.hasPrefix("transport_") { return reason }
        let known: Set<String> = ["InvalidSnapshot", "configuration", "credentials", "cancelled", "deadline_exceeded",
                                  "MissingEventField", "InvalidPayload", "BadDate", "MalformedApnsConfig", "ForbiddenHeader", "StaleTimestamp", "NotForBroadcast"]
        return known.contains(reason) ? reason : "other"
    }

    public func attemptFinished(_ event: AttemptEvent) {
        let operation = event.send.operation.rawValue
        let statusClass = event.status.map { "\($0 / 100)xx" } ?? "transport"
        counter("apns_relay_attempts_total", [("app", event.send.app), ("operation", operation), ("status_class", statusClass)]).increment()
        histogram("apns_relay_attempt_duration_seconds", [("operation", operation)]).record(event.durationSeconds)
        if !event.isFinalAttempt {
            counter("apns_relay_retries_total", [("operation", operation), ("reason", Self.reasonLabel(event.reason ?? event.errorType))]).increment()
        }
    }

    public func sendFinished(_ event: SendEvent) {
        let operation = event.send.operation.rawValue
        counter("apns_relay_sends_total", [
            ("app", event.send.app), ("operation", operation), ("outcome", event.outcome.rawValue),
            ("reason", Self.reasonLabel(event.reason ?? event.errorType)),
        ]).increment()
        histogram("apns_relay_send_duration_seconds", [("operation", operation)]).record(event.latencySeconds)
        // One definition of a trap hit (docs/api.md#trap-hits): a send hits a
        // trap when its preflight or any of its attempts maps to it, counted once
        // per send. The audit's trap_ids and the answer's trapHits are this same
        // list, so the metric and `count(*) ... WHERE trap = ANY(trap_ids)` agree;
        // a 429 that a retry got past still shows (MS015).
        for trap in event.trapHits {
            counter("apns_relay_trap_hits_total", [("trap", trap.rawValue), ("operation", operation)]).increment()
        }
    }

    /// For the HTTP/2 transport's observer.
    public func connectionEvent(origin: String, event: String) {
        counter("apns_relay_connection_events_total", [("event", event)]).increment()
    }

    /// For the ingress: one answered request.
    public func ingressRequest(route: String, status: Int, seconds: Double) {
        counter("apns_relay_ingress_requests_total", [("route", route), ("code", String(status))]).increment()
        histogram("apns_relay_ingress_request_duration_seconds", [("route", route)]).record(seconds)
    }

    /// For the JWT caches' mint callback.
    public func jwtMinted(app: String, issuedAt: Int64) {
        counter("apns_relay_jwt_mints_total", [("app", app)]).increment()
        jwtIssuedAt.withLock { $0[app] = issuedAt }
    }

    /// Refreshes the gauges that are read, not counted, just before a scrape.
    public func refresh(_ sources: MetricSources) {
        let now = UnixTime.nowSeconds()
        for (app, issuedAt) in jwtIssuedAt.withLock({ $0 }) {
            gauge("apns_relay_jwt_age_seconds", [("app", app)]).set(to: Double(now - issuedAt))
        }
        if let skew = sources.clockSkewSeconds() { gauge("apns_relay_clock_skew_seconds").set(to: Double(skew)) }
        gauge("apns_relay_retry_disabled").set(to: sources.retryDisabled() ? 1 : 0)
        gauge("apns_relay_inflight_streams").set(to: Double(sources.inflightStreams()))
        // Every state is written each scrape so a state that emptied reads 0, not its last value.
        let states = sources.connections()
        for origin in Set(states.map(\.origin)).union(knownOrigins.withLock { $0 }) {
            knownOrigins.withLock { _ = $0.insert(origin) }
            for state in ["connecting", "ready", "going_away"] {
                let count = states.first { $0.origin == origin && $0.state == state }?.count ?? 0
                gauge("apns_relay_connections", [("origin", origin), ("state", state)]).set(to: Double(count))
            }
        }
        if let ingress = sources.ingressInFlight() { gauge("apns_relay_ingress_inflight_requests").set(to: Double(ingress)) }
        if let admitted = sources.ingressSendsAdmitted() { gauge("apns_relay_ingress_sends_admitted").set(to: Double(admitted)) }
        if let running = sources.ingressBatchSendsRunning() { gauge("apns_relay_ingress_batch_sends_running").set(to: Double(running)) }
        for (reason, total) in sources.ingressNotSent() {
            let counter = counter("apns_relay_batch_sends_not_sent_total", [("reason", reason)])
            notSentTotals.withLock { seen in
                let delta = total - seen[reason, default: 0]
                if delta > 0 { counter.increment(by: Int64(delta)) }
                seen[reason] = max(seen[reason, default: 0], total)
            }
        }
        if let total = sources.ingressRequestsTimedOut() {
            let counter = counter("apns_relay_ingress_requests_timed_out_total")
            timedOutTotal.withLock { seen in
                if total > seen { counter.increment(by: Int64(total - seen)) }
                seen = max(seen, total)
            }
        }
        if let audit = sources.audit() {
            gauge("apns_relay_audit_queue_depth").set(to: Double(audit.queueDepth))
            gauge("apns_relay_audit_spool_bytes").set(to: Double(audit.spoolBytes))
            gauge("apns_relay_audit_connected").set(to: audit.connected ? 1 : 0)
            gauge("apns_relay_audit_behind_seconds").set(to: audit.behindSeconds)
            for (result, total) in [
                ("written", audit.written), ("spooled", audit.spooled), ("replayed", audit.replayed), ("dropped", audit.dropped),
                ("quarantined", audit.quarantined),
            ] {
                let counter = counter("apns_relay_audit_rows_total", [("result", result)])
                auditTotals.withLock { seen in
                    let delta = total - seen[result, default: 0]
                    if delta > 0 { counter.increment(by: Int64(delta)) }
                    seen[result] = max(seen[result, default: 0], total)
                }
            }
        }
        ProcessMetrics.update(self)
    }

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
