public import Audit
import Foundation
import HTTP2
import HTTPServer
public import Ingress
public import Logging
public import Relay
public import Telemetry

/// The relay as `apns-relay serve` runs it: its components
/// (``RelayComponents``, built from one ``ServerConfiguration`` without
/// side effects) started in order and run as the parts of one
/// swift-service-lifecycle `ServiceGroup` with an orderly drain
/// (`RelayServer+Lifecycle.swift`).
public final class RelayServer: Sendable {
    public let components: RelayComponents
    /// The parts' group, running.
    let lifecycle: RelayLifecycle

    public var configuration: ServerConfiguration { components.configuration }
    public var service: RelayService { components.service }
    public var ingress: Ingress { components.ingress }
    public var audit: AuditWriter { components.audit }
    public var metrics: RelayMetrics { components.metrics }
    /// The `Idempotency-Key` store; nil without an audit database (keyed sends are then refused).
    public var idempotency: PostgresIdempotencyStore? { components.idempotency }

    /// Where the ingress listens (the real port when the configuration said 0).
    public var ingressAddress: ServerConfiguration.Address {
        .init(host: configuration.ingress.listen.host, port: components.ingressListener.port)
    }
    public var metricsAddress: ServerConfiguration.Address {
        .init(host: configuration.metrics.listen.host, port: components.metricsListener.port)
    }
    /// Where the HTTP/2 APNs ingress listens (the real port), or nil when it is off.
    public var apnsIngressAddress: ServerConfiguration.Address? {
        guard let server = apnsIngressServer, let listen = configuration.apnsIngress.listen else { return nil }
        return .init(host: listen.host, port: UInt16(server.port))
    }
    /// The APNs-compatible HTTP/2 listener (`apns_ingress:`), when configured.
    var apnsIngressServer: APNsIngressListener? { components.ingressListener.apnsIngressServer }

    private init(components: RelayComponents, lifecycle: RelayLifecycle) {
        self.components = components
        self.lifecycle = lifecycle
    }

    /// Builds the relay's components from `configuration` and starts them
    /// (``start(_:drainingOnSignals:)``).
    ///
    /// - Throws: what building (``RelayComponents/init(configuration:logger:killSwitch:recordsAudit:)``)
    ///   or starting throws; nothing is left running.
    public static func start(
        configuration: ServerConfiguration, logger: Logger, killSwitch: KillSwitch = KillSwitch(), recordsAudit: Bool = true,
        drainingOnSignals: Bool = false
    ) async throws -> RelayServer {
        let components = try RelayComponents(configuration: configuration, logger: logger, killSwitch: killSwitch, recordsAudit: recordsAudit)
        return try await start(components, drainingOnSignals: drainingOnSignals)
    }

    /// Applies migrations when configured, starts the parts one at a time in
    /// order (the trace exporter, the metrics listener, the audit writer,
    /// whose thread replays a crash's leftovers, the idempotency purge, the
    /// APNs pool, the ingress listeners), then runs them in one group and
    /// returns once every part runs.
    ///
    /// - Throws: ``ConfigurationError`` naming the setting of the part that
    ///   could not start (`metrics.listen`, `ingress.listen`,
    ///   `apns_ingress.listen`); the parts started before it have been
    ///   stopped, and none after it started.
    /// - Parameter drainingOnSignals: true: SIGTERM and SIGINT drain the relay
    ///   (the group's `gracefulShutdownSignals`; `serve`). Otherwise only ``drain()`` does.
    public static func start(_ components: RelayComponents, drainingOnSignals: Bool = false) async throws -> RelayServer {
        let (configuration, logger) = (components.configuration, components.logger)
        // OTEL_* values the relay ignored (the specification's "warn and ignore").
        for warning in components.warnings { logger.warning("\(warning.message)", metadata: ["setting": "\(warning.setting)"]) }
        if let url = configuration.audit.databaseURL, configuration.audit.migrateOnStart {
            await migrate(conninfo: url, bound: configuration.audit.postgresWaitBound, logger: logger)
        }
        let parts = components.parts
        try await startParts(parts)
        let server = RelayServer(
            components: components,
            lifecycle: await RelayLifecycle.run(
                parts, signals: drainingOnSignals, drainTimeout: configuration.drainTimeoutSeconds, logger: logger))
        logger.info("apns-relay serving", metadata: [
            "apns_ingress": "\(server.apnsIngressAddress.map(\.description) ?? "off")",
            "ingress": "\(server.ingressAddress)",
            "metrics": "\(server.metricsAddress)",
            "apps": "\(server.service.appNames.joined(separator: ","))",
            "audit": "\(configuration.audit.databaseURL == nil ? "spool only" : "postgres + spool")",
            "instance": "\(configuration.instance)",
        ])
        return server
    }

    /// Waits until the relay has drained (after SIGTERM or SIGINT when it was
    /// started with `drainingOnSignals`, or ``drain()``), or a part failed.
    ///
    /// - Throws: ``RelayPartFailure`` naming the part that failed, ended on
    ///   its own, or did not stop within the drain's bound; the others were
    ///   drained in order first. Already logged.
    public func run() async throws {
        try await lifecycle.run()
    }

    /// SIGTERM's work, for callers without signals (tests, `demo`): the
    /// group's graceful shutdown, each part in turn (see ``RelayComponents/parts``).
    /// Returns when every part has stopped; at once when the relay has
    /// already drained. A part's failure is logged, not thrown.
    public func drain() async {
        await lifecycle.drain()
    }
}
