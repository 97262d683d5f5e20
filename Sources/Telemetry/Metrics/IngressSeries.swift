import Prometheus

/// An answered request's route and status, as ``RelayMetrics`` finds its
/// series: the status kept as a number, so a request neither formats it
/// nor hashes the label structs of both metrics.
struct IngressSeriesKey: Hashable, Sendable {
    var route: String
    var status: Int
}

/// The two series one answered request records: its
/// `apns_relay_ingress_requests_total` (route, code) and its
/// `apns_relay_ingress_request_duration_seconds` (route).
final class IngressSeries: Sendable {
    let requests: Counter
    let durations: ValueHistogram

    init(requests: Counter, durations: ValueHistogram) {
        self.requests = requests
        self.durations = durations
    }
}
