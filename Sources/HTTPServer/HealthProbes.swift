/// `/healthz` (the process answers) and `/readyz` (it can take work), worded
/// the same on every listener that serves them: the ingress (through its
/// route table) and the metrics listener.
public struct HealthProbes: Sendable {
    /// Why the server is not ready, or nil when it is.
    public typealias Readiness = @Sendable () -> String?

    public let notReadyReason: Readiness

    public init(readiness: @escaping Readiness) {
        notReadyReason = readiness
    }

    /// `GET /healthz`: 200 `ok` whenever the process can answer at all.
    public func liveness(_ request: HTTPRequest) -> HTTPResponse {
        .text(200, "ok\n")
    }

    /// `GET /readyz`: 200 `ready`, or 503 `not ready: <why>`.
    public func readiness(_ request: HTTPRequest) -> HTTPResponse {
        if let reason = notReadyReason() { return .text(503, "not ready: \(reason)\n") }
        return .text(200, "ready\n")
    }

    /// Adds both probes to `router`, for a listener that serves them as they are.
    public func install(on router: inout Router) {
        let probes = self
        router.add("GET", "/healthz") { probes.liveness($0) }
        router.add("GET", "/readyz") { probes.readiness($0) }
    }
}
