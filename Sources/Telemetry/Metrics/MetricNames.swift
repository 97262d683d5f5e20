/// The relay's Prometheus metrics: names, label sets and help text, in one
/// place so dashboards, alert rules and docs can be checked against it.
public enum MetricNames {
    public static let help: [String: String] = [
        "apns_relay_sends_total": "Logical sends finished, by app, operation, outcome and reason (none on success).",
        "apns_relay_attempts_total": "Attempts sent to APNs, by app, operation and status class (2xx, 4xx, 5xx, transport).",
        "apns_relay_retries_total": "Attempts followed by a retry, by operation and the reason that caused it.",
        "apns_relay_trap_hits_total": "Sends that hit a trap (on preflight or on any attempt, once per send and trap), by trap id and operation.",
        "apns_relay_send_duration_seconds": "Wall time of a logical send, retries and backoff included, by operation.",
        "apns_relay_attempt_duration_seconds": "Time of one attempt from request to answer, by operation.",
        "apns_relay_inflight_streams": "HTTP/2 requests queued or in flight across every APNs connection.",
        "apns_relay_connections": "Open HTTP/2 connections to APNs, by origin and state (connecting, ready, going_away).",
        "apns_relay_connection_events_total": "HTTP/2 connection events (opened, closed, goaway, ping_timeout, reconnect, refused).",
        "apns_relay_jwt_mints_total": "Provider tokens (JWT) minted, by app.",
        "apns_relay_jwt_age_seconds": "Age of the newest provider token, by app.",
        "apns_relay_clock_skew_seconds": "Local clock minus APNs' Date header at the last response.",
        "apns_relay_retry_disabled": "1 while the retry kill switch is engaged, else 0.",
        "apns_relay_audit_queue_depth": "Audit rows waiting for the writer thread.",
        "apns_relay_audit_rows_total": "Audit rows by result (written, spooled, replayed, quarantined, dropped).",
        "apns_relay_audit_behind_seconds": "Seconds audit rows have been waiting for the configured Postgres (spooled or unconnected); 0 when caught up.",
        "apns_relay_audit_spool_bytes": "Bytes held in the audit disk spool.",
        "apns_relay_audit_connected": "1 while the audit writer holds a Postgres connection, else 0.",
        "apns_relay_ingress_requests_total": "Requests answered by the ingress, by route pattern and HTTP status code.",
        "apns_relay_ingress_request_duration_seconds": "Time from reading an ingress request to answering it, by route pattern.",
        "apns_relay_ingress_inflight_requests": "Ingress requests being handled now.",
        "apns_relay_ingress_sends_admitted": "Sends admitted and not yet finished, a batch counted whole (limit: ingress.max_sends_in_flight).",
        "apns_relay_ingress_batch_sends_running": "Sends of batches running now (limit: ingress.max_batch_sends_running).",
        "apns_relay_ingress_requests_timed_out_total": "Ingress connections cut because a request did not arrive whole within ingress.request_timeout_seconds (slow or slowloris clients).",
        "apns_relay_batch_sends_not_sent_total": "Batch sends never started, by reason (Draining, BatchDeadline, ClientGone).",
        "apns_relay_build_info": "Build and library versions; always 1.",
        "process_resident_memory_bytes": "Resident memory size in bytes.",
        "process_virtual_memory_bytes": "Virtual memory size in bytes.",
        "process_cpu_seconds_total": "Total user and system CPU time spent in seconds.",
        "process_open_fds": "Number of open file descriptors.",
        "process_max_fds": "Maximum number of open file descriptors.",
        "process_start_time_seconds": "Start time of the process since the unix epoch in seconds.",
        "process_threads": "Number of OS threads in the process.",
    ]

    /// Histogram buckets for APNs latencies: 1 ms to 30 s.
    public static let latencyBuckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
}
