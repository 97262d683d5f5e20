/// The relay's long-running parts, in the order they start.
extension RelayComponents {
    /// The parts in the order ``RelayServer/start(_:drainingOnSignals:)``
    /// starts them, one at a time, and the group lists them; the group shuts
    /// them down in reverse, so the drain runs bottom to top:
    ///
    /// 1. ingress listener: intake stops (new connections refused, 503
    ///    `Draining` on open ones, `/readyz` 503), the
    ///    requests in flight finish within the drain timeout; the APNs pools
    ///    close shortly before it ends so running sends end with a result.
    /// 2. APNs pool: closed (in-flight streams get 5 s; after the cut-off there are none).
    /// 3. idempotency purge (with an audit database): its loop ends.
    /// 4. audit writer: waits for the relay's sends to publish their events,
    ///    then writes every journaled row to Postgres or the spool.
    /// 5. metrics listener: stopped.
    /// 6. trace exporter (`tracing.exporter: otlp`): what is queued, the
    ///    drain's own spans included, is exported within what is left of the
    ///    drain timeout, 1 s at least.
    ///
    /// Started in this order, the exporter takes spans and the writer takes
    /// rows before the listeners take requests. Each part holds the
    /// components it needs, not the relay.
    var parts: [any RelayPart] {
        let drainTimeout = configuration.drainTimeoutSeconds
        var parts: [any RelayPart] = []
        if tracing.exporter != nil {
            parts.append(TraceExporterPart(tracing: tracing, drain: drain, drainTimeout: drainTimeout, logger: logger))
        }
        parts.append(metricsListener)
        parts.append(AuditWriterPart(
            audit: audit, service: service, ingress: ingress, drain: drain, drainTimeout: drainTimeout,
            sendDeadline: configuration.apns.sendDeadlineSeconds, logger: logger))
        // After the audit writer: shut down before it, with nothing to flush.
        if let purge { parts.append(purge) }
        parts.append(APNsPoolPart(transport: transport, logger: logger))
        parts.append(ingressListener)
        return parts
    }
}
