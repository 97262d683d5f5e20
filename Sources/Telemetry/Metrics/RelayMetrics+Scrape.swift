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
        let auditTotals = Mutex<[String: Int]>([:])
        let notSentTotals = Mutex<[String: Int]>([:])
        let timedOutTotal = Mutex<Int>(0)
        let auditPostgresTimeoutsTotal = Mutex<Int>(0)
        /// The process' log lines dropped so far (the standard error sink's; a
        /// test may read its own sink instead).
        let logLinesDropped: @Sendable () -> Int
        let logDroppedTotal = Mutex<Int>(0)
        let process = ProcessMetrics()

        init(logLinesDropped: @escaping @Sendable () -> Int) {
            self.logLinesDropped = logLinesDropped
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
        for (reason, total) in sources.ingressNotSent() {
            let counter = counter(MetricCatalog.batchSendsNotSentTotal, NotSentLabels(reason: reason))
            scrape.notSentTotals.withLock { seen in
                let delta = total - seen[reason, default: 0]
                if delta > 0 { counter.increment(by: Int64(delta)) }
                seen[reason] = max(seen[reason, default: 0], total)
            }
        }
        if let total = sources.ingressRequestsTimedOut() {
            let counter = counter(MetricCatalog.ingressRequestsTimedOutTotal)
            scrape.timedOutTotal.withLock { seen in
                if total > seen { counter.increment(by: Int64(total - seen)) }
                seen = max(seen, total)
            }
        }
        if let audit = sources.audit() {
            gauge(MetricCatalog.auditQueueDepth).set(to: Double(audit.queueDepth))
            gauge(MetricCatalog.auditSpoolBytes).set(to: Double(audit.spoolBytes))
            gauge(MetricCatalog.auditConnected).set(to: audit.connected ? 1 : 0)
            gauge(MetricCatalog.auditBehind).set(to: audit.behindSeconds)
            gauge(MetricCatalog.auditJournalUnsynced).set(to: audit.journalUnsyncedSeconds)
            let timeouts = counter(MetricCatalog.auditPostgresTimeoutsTotal)
            scrape.auditPostgresTimeoutsTotal.withLock { seen in
                if audit.postgresTimeouts > seen { timeouts.increment(by: Int64(audit.postgresTimeouts - seen)) }
                seen = max(seen, audit.postgresTimeouts)
            }
            for (result, total) in [
                ("written", audit.written), ("spooled", audit.spooled), ("replayed", audit.replayed), ("dropped", audit.dropped),
                ("quarantined", audit.quarantined),
            ] {
                let counter = counter(MetricCatalog.auditRowsTotal, AuditRowLabels(result: result))
                scrape.auditTotals.withLock { seen in
                    let delta = total - seen[result, default: 0]
                    if delta > 0 { counter.increment(by: Int64(delta)) }
                    seen[result] = max(seen[result, default: 0], total)
                }
            }
        }
        let logDropped = scrape.logLinesDropped()
        let logCounter = counter(MetricCatalog.logLinesDroppedTotal)
        scrape.logDroppedTotal.withLock { seen in
            if logDropped > seen { logCounter.increment(by: Int64(logDropped - seen)) }
            seen = max(seen, logDropped)
        }
        scrape.process.update(self)
    }
}
