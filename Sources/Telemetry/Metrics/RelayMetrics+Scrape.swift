import Prometheus
import RelayBasics
import Synchronization

extension RelayMetrics {
    /// What scrape-time metrics keep between scrapes: the JWTs' issue
    /// times, the origins seen, and the last totals read from sources that
    /// count cumulatively (each counter is advanced by the difference).
    final class ScrapeState: Sendable {
        let jwtIssuedAt = Mutex<[String: Int64]>([:])
        let knownOrigins = Mutex<Set<String>>([])
        /// The last total read from each cumulative source, by the counter's
        /// name and labels (``advance(_:to:as:)``).
        let totalsSeen = Mutex<[String: Int]>([:])
        /// The process' log lines dropped so far (the standard error sink's; a
        /// test may read its own sink instead).
        let logLinesDropped: @Sendable () -> Int
        let process = ProcessMetrics()

        init(logLinesDropped: @escaping @Sendable () -> Int) {
            self.logLinesDropped = logLinesDropped
        }

        /// Advances `counter` by what `total` (a source's own running count)
        /// grew since the last scrape read it under `key`; a total that
        /// went down (a source restarted) is not subtracted.
        func advance(_ counter: Counter, to total: Int, as key: String) {
            totalsSeen.withLock { seen in
                let delta = total - seen[key, default: 0]
                if delta > 0 { counter.increment(by: Int64(delta)) }
                seen[key] = max(seen[key, default: 0], total)
            }
        }
    }

    /// Refreshes the gauges that are read, not counted, just before a scrape.
    public func refresh(_ sources: MetricSources) {
        let now = UnixTime.nowSeconds()
        for (app, issuedAt) in scrape.jwtIssuedAt.withLock({ $0 }) {
            gauge(MetricCatalog.jwtAge, AppLabels(app: app)).set(to: Double(now - issuedAt))
        }
        if let skew = sources.clockSkewSeconds() { gauge(MetricCatalog.clockSkew).set(to: Double(skew)) }
        gauge(MetricCatalog.retryDisabled).set(to: sources.retryDisabled() ? 1 : 0)
        gauge(MetricCatalog.inflightStreams).set(to: Double(sources.inflightStreams()))
        // Every state is written each scrape so a state that emptied reads 0, not its last value.
        let states = sources.connections()
        for origin in Set(states.map(\.origin)).union(scrape.knownOrigins.withLock { $0 }) {
            scrape.knownOrigins.withLock { _ = $0.insert(origin) }
            for state in ["connecting", "ready", "going_away"] {
                let count = states.first { $0.origin == origin && $0.state == state }?.count ?? 0
                gauge(MetricCatalog.connections, ConnectionLabels(origin: origin, state: state)).set(to: Double(count))
            }
        }
        if let ingress = sources.ingressInFlight() { gauge(MetricCatalog.ingressInflightRequests).set(to: Double(ingress)) }
        if let admitted = sources.ingressSendsAdmitted() { gauge(MetricCatalog.ingressSendsAdmitted).set(to: Double(admitted)) }
        if let running = sources.ingressBatchSendsRunning() { gauge(MetricCatalog.ingressBatchSendsRunning).set(to: Double(running)) }
        advance(MetricCatalog.batchSendsNotSentTotal, byReason: sources.ingressNotSent(), as: "not_sent/")
        advance(MetricCatalog.apnsIngressConnectionsRefusedTotal, byReason: sources.apnsIngressConnectionsRefused(), as: "apns_ingress_refused/")
        if let total = sources.ingressRequestsTimedOut() {
            scrape.advance(counter(MetricCatalog.ingressRequestsTimedOutTotal), to: total, as: "ingress_timed_out")
        }
        if let audit = sources.audit() {
            gauge(MetricCatalog.auditQueueDepth).set(to: Double(audit.queueDepth))
            gauge(MetricCatalog.auditSpoolBytes).set(to: Double(audit.spoolBytes))
            gauge(MetricCatalog.auditConnected).set(to: audit.connected ? 1 : 0)
            gauge(MetricCatalog.auditBehind).set(to: audit.behindSeconds)
            gauge(MetricCatalog.auditJournalUnsynced).set(to: audit.journalUnsyncedSeconds)
            scrape.advance(counter(MetricCatalog.auditPostgresTimeoutsTotal), to: audit.postgresTimeouts, as: "audit_postgres_timeouts")
            for (result, total) in [
                ("written", audit.written), ("spooled", audit.spooled), ("replayed", audit.replayed), ("dropped", audit.dropped),
                ("quarantined", audit.quarantined),
            ] {
                scrape.advance(counter(MetricCatalog.auditRowsTotal, AuditRowLabels(result: result)), to: total, as: "audit_rows/" + result)
            }
        }
        scrape.advance(counter(MetricCatalog.logLinesDroppedTotal), to: scrape.logLinesDropped(), as: "log_lines_dropped")
        scrape.process.update(self)
    }

    /// Advances `definition`'s series of each reason to that reason's running
    /// total in `totals` (a source's own counts, by reason).
    private func advance(_ definition: CounterDefinition<ReasonLabels>, byReason totals: [String: Int], as prefix: String) {
        for (reason, total) in totals {
            scrape.advance(counter(definition, ReasonLabels(reason: reason)), to: total, as: prefix + reason)
        }
    }
}
