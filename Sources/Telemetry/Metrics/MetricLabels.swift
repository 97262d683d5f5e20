/// The label set of a metric, as a type: a definition names its label type, so
/// a recording can only pass the labels its metric declares, all of them, in
/// the declared order (the compiler checks it, not a scrape).
protocol MetricLabels: Sendable {
    /// Label names in exposition order; nil when each value chooses its own.
    static var names: [String]? { get }
    /// Each label's name and value, in exposition order.
    var pairs: [(String, String)] { get }
}

/// A label set whose names are fixed: each name is written once, beside the
/// property that holds its value, so names and values cannot drift apart.
/// Hashable, so the series of a label set can be kept (``SeriesCache``).
protocol FixedMetricLabels: MetricLabels, Hashable {
    static var fields: [(name: String, value: KeyPath<Self, String>)] { get }
}

extension FixedMetricLabels {
    static var names: [String]? { fields.map(\.name) }
    var pairs: [(String, String)] { Self.fields.map { ($0.name, self[keyPath: $0.value]) } }
}

/// No labels: the metric has one series.
struct NoLabels: FixedMetricLabels {
    static var fields: [(name: String, value: KeyPath<Self, String>)] { [] }
}

/// `apns_relay_build_info`'s labels: the relay's version and each C library's,
/// chosen by the caller (`RelayServer.buildInfo`), so they are not declared.
struct BuildInfoLabels: MetricLabels {
    static var names: [String]? { nil }
    let pairs: [(String, String)]
}

/// `apns_relay_sends_total`.
struct SendLabels: FixedMetricLabels {
    var app: String, operation: String, outcome: String, reason: String
    static var fields: [(name: String, value: KeyPath<Self, String>)] {
        [("app", \.app), ("operation", \.operation), ("outcome", \.outcome), ("reason", \.reason)]
    }
}

/// `apns_relay_attempts_total`.
struct AttemptLabels: FixedMetricLabels {
    var app: String, operation: String, statusClass: String
    static var fields: [(name: String, value: KeyPath<Self, String>)] {
        [("app", \.app), ("operation", \.operation), ("status_class", \.statusClass)]
    }
}

/// `apns_relay_retries_total`.
struct RetryLabels: FixedMetricLabels {
    var operation: String, reason: String
    static var fields: [(name: String, value: KeyPath<Self, String>)] { [("operation", \.operation), ("reason", \.reason)] }
}

/// `apns_relay_trap_hits_total`.
struct TrapHitLabels: FixedMetricLabels {
    var trap: String, operation: String
    static var fields: [(name: String, value: KeyPath<Self, String>)] { [("trap", \.trap), ("operation", \.operation)] }
}

/// The send and attempt duration histograms.
struct OperationLabels: FixedMetricLabels {
    var operation: String
    static var fields: [(name: String, value: KeyPath<Self, String>)] { [("operation", \.operation)] }
}

/// `apns_relay_jwt_mints_total` and `apns_relay_jwt_age_seconds`.
struct AppLabels: FixedMetricLabels {
    var app: String
    static var fields: [(name: String, value: KeyPath<Self, String>)] { [("app", \.app)] }
}

/// `apns_relay_connections`.
struct ConnectionLabels: FixedMetricLabels {
    var origin: String, state: String
    static var fields: [(name: String, value: KeyPath<Self, String>)] { [("origin", \.origin), ("state", \.state)] }
}

/// `apns_relay_connection_events_total`.
struct ConnectionEventLabels: FixedMetricLabels {
    var event: String
    static var fields: [(name: String, value: KeyPath<Self, String>)] { [("event", \.event)] }
}

/// `apns_relay_ingress_requests_total`.
struct IngressRequestLabels: FixedMetricLabels {
    var route: String, code: String
    static var fields: [(name: String, value: KeyPath<Self, String>)] { [("route", \.route), ("code", \.code)] }
}

/// `apns_relay_ingress_request_duration_seconds`.
struct RouteLabels: FixedMetricLabels {
    var route: String
    static var fields: [(name: String, value: KeyPath<Self, String>)] { [("route", \.route)] }
}

/// A counter by its one `reason` label: `apns_relay_batch_sends_not_sent_total`,
/// `apns_relay_apns_ingress_connections_refused_total`, `apns_relay_spans_dropped_total`.
struct ReasonLabels: FixedMetricLabels {
    var reason: String
    static var fields: [(name: String, value: KeyPath<Self, String>)] { [("reason", \.reason)] }
}

/// `apns_relay_audit_rows_total`.
struct AuditRowLabels: FixedMetricLabels {
    var result: String
    static var fields: [(name: String, value: KeyPath<Self, String>)] { [("result", \.result)] }
}
