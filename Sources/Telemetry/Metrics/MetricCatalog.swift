/// Every Prometheus metric the relay exports, each declared once: name, HELP
/// text, label set and buckets. Recording goes through these values
/// (`RelayMetrics`), docs/architecture.md lists the same names (checked by
/// `MetricCatalogTests`), and dashboards and alert rules are checked against
/// a live scrape.
public enum MetricCatalog {
    /// Histogram buckets for APNs latencies: 1 ms to 30 s.
    static let latencyBuckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

    // MARK: Sends and attempts

    static let sendsTotal = CounterDefinition(
        "apns_relay_sends_total", help: "Logical sends finished, by app, operation, outcome and reason (none on success).",
        labels: SendLabels.self)
    static let attemptsTotal = CounterDefinition(
        "apns_relay_attempts_total", help: "Attempts sent to APNs, by app, operation and status class (2xx, 4xx, 5xx, transport).",
        labels: AttemptLabels.self)
    static let retriesTotal = CounterDefinition(
        "apns_relay_retries_total", help: "Attempts followed by a retry, by operation and the reason that caused it.",
        labels: RetryLabels.self)
    static let trapHitsTotal = CounterDefinition(
        "apns_relay_trap_hits_total",
        help: "Sends that hit a trap (on preflight or on any attempt, once per send and trap), by trap id and operation.",
        labels: TrapHitLabels.self)
    static let sendDuration = HistogramDefinition(
        "apns_relay_send_duration_seconds", help: "Wall time of a logical send, retries and backoff included, by operation.",
        labels: OperationLabels.self, buckets: latencyBuckets)
    static let attemptDuration = HistogramDefinition(
        "apns_relay_attempt_duration_seconds", help: "Time of one attempt from request to answer, by operation.",
        labels: OperationLabels.self, buckets: latencyBuckets)

    // MARK: The HTTP/2 transport and provider tokens

    static let inflightStreams = GaugeDefinition(
        "apns_relay_inflight_streams", help: "HTTP/2 requests queued or in flight across every APNs connection.")
    static let connections = GaugeDefinition(
        "apns_relay_connections", help: "Open HTTP/2 connections to APNs, by origin and state (connecting, ready, going_away).",
        labels: ConnectionLabels.self)
    static let connectionEventsTotal = CounterDefinition(
        "apns_relay_connection_events_total",
        help: "HTTP/2 connection events (opened, closed, goaway, ping_timeout, reconnect, refused).",
        labels: ConnectionEventLabels.self)
    static let jwtMintsTotal = CounterDefinition(
        "apns_relay_jwt_mints_total", help: "Provider tokens (JWT) minted, by app.", labels: AppLabels.self)
    static let jwtAge = GaugeDefinition(
        "apns_relay_jwt_age_seconds", help: "Age of the newest provider token, by app.", labels: AppLabels.self)
    static let clockSkew = GaugeDefinition(
        "apns_relay_clock_skew_seconds", help: "Local clock minus APNs' Date header at the last response.")
    static let retryDisabled = GaugeDefinition(
        "apns_relay_retry_disabled", help: "1 while the retry kill switch is engaged, else 0.")

    // MARK: The audit

    static let auditQueueDepth = GaugeDefinition(
        "apns_relay_audit_queue_depth", help: "Audit rows waiting for the writer thread.")
    static let auditRowsTotal = CounterDefinition(
        "apns_relay_audit_rows_total", help: "Audit rows by result (written, spooled, replayed, quarantined, dropped).",
        labels: AuditRowLabels.self)
    static let auditBehind = GaugeDefinition(
        "apns_relay_audit_behind_seconds",
        help: "Seconds audit rows have been waiting for the configured Postgres (spooled or unconnected); 0 when caught up.")
    static let auditSpoolBytes = GaugeDefinition(
        "apns_relay_audit_spool_bytes", help: "Bytes held in the audit disk spool.")
    static let auditConnected = GaugeDefinition(
        "apns_relay_audit_connected", help: "1 while the audit writer holds a Postgres connection, else 0.")
    static let auditJournalUnsynced = GaugeDefinition(
        "apns_relay_audit_journal_unsynced_seconds",
        help: "Seconds the oldest audit journal record has waited for its fdatasync; 0 when all are synced. Grows while the spool disk's sync does not return.")
    static let auditPostgresTimeoutsTotal = CounterDefinition(
        "apns_relay_audit_postgres_timeouts_total",
        help: "Connects and statements of the audit writer that Postgres did not answer within audit.postgres_timeout_ms; each closed its connection and spooled its rows.")

    // MARK: The ingress

    static let ingressRequestsTotal = CounterDefinition(
        "apns_relay_ingress_requests_total", help: "Requests answered by the ingress, by route pattern and HTTP status code.",
        labels: IngressRequestLabels.self)
    static let ingressRequestDuration = HistogramDefinition(
        "apns_relay_ingress_request_duration_seconds", help: "Time from reading an ingress request to answering it, by route pattern.",
        labels: RouteLabels.self, buckets: latencyBuckets)
    static let ingressInflightRequests = GaugeDefinition(
        "apns_relay_ingress_inflight_requests", help: "Ingress requests being handled now.")
    static let ingressSendsAdmitted = GaugeDefinition(
        "apns_relay_ingress_sends_admitted",
        help: "Sends admitted and not yet finished, a batch counted whole (limit: ingress.max_sends_in_flight).")
    static let ingressBatchSendsRunning = GaugeDefinition(
        "apns_relay_ingress_batch_sends_running", help: "Sends of batches running now (limit: ingress.max_batch_sends_running).")
    static let ingressRequestsTimedOutTotal = CounterDefinition(
        "apns_relay_ingress_requests_timed_out_total",
        help: "Ingress connections cut because a request did not arrive whole within ingress.request_timeout_seconds (slow or slowloris clients).")
    static let apnsIngressConnectionsRefusedTotal = CounterDefinition(
        "apns_relay_apns_ingress_connections_refused_total",
        help: "Connections the HTTP/2 APNs ingress closed at accept, by reason (max_connections, max_connections_per_client, descriptors, threads, stopping).",
        labels: ReasonLabels.self)
    static let batchSendsNotSentTotal = CounterDefinition(
        "apns_relay_batch_sends_not_sent_total", help: "Batch sends never started, by reason (Draining, BatchDeadline, ClientGone).",
        labels: ReasonLabels.self)
    static let idempotentReplaysTotal = CounterDefinition(
        "apns_relay_idempotent_replays_total",
        help: "Sends answered from an earlier send with the same Idempotency-Key (nothing sent, no audit row), by app.",
        labels: AppLabels.self)

    // MARK: Trace export

    static let spansDroppedTotal = CounterDefinition(
        "apns_relay_spans_dropped_total",
        help: "Finished spans never delivered to the OTLP collector, by reason (queue_full: the export queue was full; export_failed: the collector was down, slow or answered an error).",
        labels: ReasonLabels.self)

    // MARK: Logs

    static let logLinesDroppedTotal = CounterDefinition(
        "apns_relay_log_lines_dropped_total",
        help: "Log lines dropped whole because standard error took nothing while the log buffer was full (a stalled or slow log collector), or was given up on at shutdown.")

    // MARK: The process

    static let buildInfo = GaugeDefinition(
        "apns_relay_build_info", help: "Build and library versions; always 1.", labels: BuildInfoLabels.self)
    static let residentMemory = GaugeDefinition(
        "process_resident_memory_bytes", help: "Resident memory size in bytes.")
    static let virtualMemory = GaugeDefinition(
        "process_virtual_memory_bytes", help: "Virtual memory size in bytes.")
    static let cpuSecondsTotal = CounterDefinition(
        "process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds.")
    static let openFDs = GaugeDefinition(
        "process_open_fds", help: "Number of open file descriptors.")
    static let maxFDs = GaugeDefinition(
        "process_max_fds", help: "Maximum number of open file descriptors.")
    static let startTime = GaugeDefinition(
        "process_start_time_seconds", help: "Start time of the process since the unix epoch in seconds.")
    static let threads = GaugeDefinition(
        "process_threads", help: "Number of OS threads in the process.")
}

extension MetricCatalog {
    /// Every declaration above, in the order of this file.
    public static let declarations: [MetricDeclaration] = [
        sendsTotal.declaration, attemptsTotal.declaration, retriesTotal.declaration, trapHitsTotal.declaration,
        sendDuration.declaration, attemptDuration.declaration,
        inflightStreams.declaration, connections.declaration, connectionEventsTotal.declaration, jwtMintsTotal.declaration,
        jwtAge.declaration, clockSkew.declaration, retryDisabled.declaration,
        auditQueueDepth.declaration, auditRowsTotal.declaration, auditBehind.declaration, auditSpoolBytes.declaration,
        auditConnected.declaration, auditJournalUnsynced.declaration, auditPostgresTimeoutsTotal.declaration,
        ingressRequestsTotal.declaration, ingressRequestDuration.declaration, ingressInflightRequests.declaration,
        ingressSendsAdmitted.declaration, ingressBatchSendsRunning.declaration, ingressRequestsTimedOutTotal.declaration,
        apnsIngressConnectionsRefusedTotal.declaration, batchSendsNotSentTotal.declaration, idempotentReplaysTotal.declaration, spansDroppedTotal.declaration,
        logLinesDroppedTotal.declaration,
        buildInfo.declaration, residentMemory.declaration, virtualMemory.declaration, cpuSecondsTotal.declaration,
        openFDs.declaration, maxFDs.declaration, startTime.declaration, threads.declaration,
    ]
}
