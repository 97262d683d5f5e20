public import HTTPServer
import Prometheus
import RelayBasics

/// The metrics listener: `/metrics` (Prometheus text format, gzipped for
/// scrapers that ask), `/healthz` (the process answers) and `/readyz` (the
/// relay can take sends).
public struct MetricsEndpoint: Sendable {
    /// Why the relay is not ready, or nil when it is.
    public typealias Readiness = @Sendable () -> String?

    let metrics: RelayMetrics
    let sources: MetricSources
    let readiness: Readiness

    public init(metrics: RelayMetrics, sources: MetricSources, buildInfo: [(String, String)], readiness: @escaping Readiness = { nil }) {
        self.metrics = metrics
        self.sources = sources
        self.readiness = readiness
        metrics.gauge(MetricCatalog.buildInfo, BuildInfoLabels(pairs: buildInfo)).set(to: 1)
    }

    /// Adds the three routes to `router`.
    public func install(on router: inout Router) {
        let metrics = metrics
        let sources = sources
        let readiness = readiness
        router.add("GET", "/metrics") { _ in
            metrics.refresh(sources)
            return HTTPResponse(
                status: 200, headers: [HTTPHeader("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                body: metrics.registry.emitToBuffer())
        }
        HealthProbes(readiness: readiness).install(on: &router)
    }
}
