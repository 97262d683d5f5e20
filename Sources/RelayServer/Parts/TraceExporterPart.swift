import Logging

/// The OTLP exporter's thread (`tracing.exporter: otlp`): the first part to
/// start and the last to stop, so the drain's own spans are exported.
struct TraceExporterPart: RelayPart {
    let name = "trace exporter"
    let tracing: RelayTracing
    let drain: DrainClock
    let drainTimeout: Double
    let logger: Logger

    func start() async throws {
        try tracing.start()
    }

    /// Exports what is queued within what is left of the drain timeout, 1 s at least.
    func stop() async {
        await tracing.shutdown(within: max(1, drainTimeout - drain.elapsed))
    }
}
