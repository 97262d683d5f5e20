public import Audit
public import Ingress
public import Logging
public import Relay
public import Telemetry
import HTTP2

/// The relay's components, built from one ``ServerConfiguration`` and
/// nothing started: no thread, socket or task exists until
/// ``RelayServer/start(_:drainingOnSignals:)`` starts the long-running parts
/// (``parts``) one at a time, in order.
///
/// Building checks what can be checked without starting anything, and
/// throws ``ConfigurationError`` naming the setting otherwise: the OTLP
/// settings resolve, the spool directory opens, every app's key loads.
/// What only a start can tell (a port in use, a certificate the HTTP/2
/// listener cannot read) is the start's error. A value is started once.
public struct RelayComponents: Sendable {
    public let configuration: ServerConfiguration
    public let metrics: RelayMetrics
    public let service: RelayService
    public let ingress: Ingress
    public let audit: AuditWriter
    /// The `Idempotency-Key` store; nil without an audit database (keyed sends are then refused).
    public let idempotency: PostgresIdempotencyStore?
    let tracing: RelayTracing
    let transport: HTTP2Transport
    let ingressListener: IngressListener
    let metricsListener: MetricsListener
    /// Deletes expired idempotency keys while the relay runs (with an audit database).
    let purge: IdempotencyPurge?
    /// When the drain began, for the parts that share its time.
    let drain: DrainClock
    /// The relay's logger, its lines carrying the current span's ids.
    let logger: Logger

    /// Builds every component and part of the relay from `configuration`.
    ///
    /// - Throws: ``ConfigurationError`` for what the configuration got wrong,
    ///   or the credential error of the first app whose key cannot be used.
    /// - Parameter recordsAudit: false leaves the audit writer out of the send
    ///   path. Only benchmarks use it, to measure what the audit costs
    ///   (`bench ingress`, and `serve --benchmark-without-audit` for
    ///   scripts/bench); `serve` otherwise always audits.
    public init(configuration: ServerConfiguration, logger: Logger, killSwitch: KillSwitch = KillSwitch(), recordsAudit: Bool = true) throws {
        self.configuration = configuration
        let metrics = RelayMetrics()
        self.metrics = metrics
        tracing = try Self.tracing(configuration, logger: logger, metrics: metrics)
        // Log lines written inside a span carry its trace id, whichever tracer made it.
        var logger = logger
        logger.handler.metadataProvider = tracing.metadataProvider
        self.logger = logger
        transport = Self.transport(configuration, metrics: metrics)
        audit = try Self.auditWriter(configuration, logger: logger)
        service = try RelayService(
            configuration: Self.relayConfiguration(configuration), transport: transport, killSwitch: killSwitch,
            observers: recordsAudit ? [metrics, audit] : [metrics],
            tracer: tracing.tracer, logger: logger, jwtMinted: { app, issuedAt in metrics.jwtMinted(app: app, issuedAt: issuedAt) })
        idempotency = Self.idempotencyStore(configuration, logger: logger)
        ingress = Self.ingress(configuration, service: service, audit: audit, idempotency: idempotency, tracing: tracing, metrics: metrics, logger: logger)
        drain = DrainClock()
        ingressListener = IngressListener(
            configuration: configuration, ingress: ingress, transport: transport, drain: drain, logger: logger)
        metricsListener = MetricsListener(
            listen: configuration.metrics.listen,
            router: Self.metricsRouter(
                metrics: metrics, service: service, transport: transport, audit: audit, ingress: ingress, listener: ingressListener),
            logger: logger)
        purge = idempotency.map { IdempotencyPurge(store: $0, interval: configuration.ingress.idempotencyPurgeIntervalSeconds, logger: logger) }
    }

    /// What the `OTEL_*` variables and the tracing settings said that the
    /// relay ignored; logged when the relay starts.
    var warnings: [(setting: String, message: String)] {
        configuration.tracing.environmentWarnings.map { ("tracing.exporter", $0) } + tracing.warnings.map { ("tracing", $0) }
    }
}
