public import Relay
import Prometheus

extension RelayMetrics {
    /// The series every send and every ingress request records, one cache
    /// per metric: swift-prometheus looks a series up by name and labels
    /// under its lock (and checks the name and HELP text) on every `make…`
    /// call. Each cache is bound to its declaration here.
    struct SendSeries: Sendable {
        let attempts: SeriesCache<AttemptLabels, Counter>
        let attemptDurations: SeriesCache<OperationLabels, ValueHistogram>
        let retries: SeriesCache<RetryLabels, Counter>
        let sends: SeriesCache<SendLabels, Counter>
        let sendDurations: SeriesCache<OperationLabels, ValueHistogram>
        let trapHits: SeriesCache<TrapHitLabels, Counter>
        /// Both series of an answered request by route and status, found by one
        /// lookup keyed by the status as a number (no label structs, no status
        /// text per request). The registry hands out one series per label set,
        /// so the histogram a route shares across its statuses is one object.
        let ingressSeries: SeriesCache<IngressSeriesKey, IngressSeries>

        init(registry: PrometheusCollectorRegistry) {
            attempts = SeriesCache { RelayMetrics.counter(MetricCatalog.attemptsTotal, $0, in: registry) }
            attemptDurations = SeriesCache { RelayMetrics.histogram(MetricCatalog.attemptDuration, $0, in: registry) }
            retries = SeriesCache { RelayMetrics.counter(MetricCatalog.retriesTotal, $0, in: registry) }
            sends = SeriesCache { RelayMetrics.counter(MetricCatalog.sendsTotal, $0, in: registry) }
            sendDurations = SeriesCache { RelayMetrics.histogram(MetricCatalog.sendDuration, $0, in: registry) }
            trapHits = SeriesCache { RelayMetrics.counter(MetricCatalog.trapHitsTotal, $0, in: registry) }
            ingressSeries = SeriesCache { key in
                IngressSeries(
                    requests: RelayMetrics.counter(
                        MetricCatalog.ingressRequestsTotal, IngressRequestLabels(route: key.route, code: String(key.status)), in: registry),
                    durations: RelayMetrics.histogram(MetricCatalog.ingressRequestDuration, RouteLabels(route: key.route), in: registry))
            }
        }
    }

    public func attemptFinished(_ event: AttemptEvent) {
        let operation = event.send.operation.rawValue
        series.attempts.series(AttemptLabels(app: event.send.app, operation: operation, statusClass: Self.statusClass(event.status))).increment()
        series.attemptDurations.series(OperationLabels(operation: operation)).record(event.durationSeconds)
        if !event.isFinalAttempt {
            series.retries.series(RetryLabels(operation: operation, reason: Self.reasonLabel(event.reason ?? event.errorType))).increment()
        }
    }

    public func sendFinished(_ event: SendEvent) {
        let operation = event.send.operation.rawValue
        series.sends.series(SendLabels(
            app: event.send.app, operation: operation, outcome: event.outcome.rawValue,
            reason: Self.reasonLabel(event.reason ?? event.errorType))).increment()
        series.sendDurations.series(OperationLabels(operation: operation)).record(event.latencySeconds)
        // One definition of a trap hit (docs/api.md#trap-hits): a send hits a
        // trap when its preflight or any of its attempts maps to it, counted once
        // per send. The audit's trap_ids and the answer's trapHits are this same
        // list, so the metric and `count(*) ... WHERE trap = ANY(trap_ids)` agree;
        // a 429 that a retry got past still shows (MS015).
        for trap in event.trapHits {
            series.trapHits.series(TrapHitLabels(trap: trap.rawValue, operation: operation)).increment()
        }
    }

    /// For the ingress: one answered request.
    public func ingressRequest(route: String, status: Int, seconds: Double) {
        let series = self.series.ingressSeries.series(IngressSeriesKey(route: route, status: status))
        series.requests.increment()
        series.durations.record(seconds)
    }
}
