import Audit
import Foundation
import HTTP2
import HTTPServer
import Ingress
import Logging
import Relay
import Telemetry

/// Each component from its share of the configuration: constructors only,
/// nothing started (``RelayComponents``).
extension RelayComponents {
    static func tracing(_ configuration: ServerConfiguration, logger: Logger, metrics: RelayMetrics) throws -> RelayTracing {
        let tracing = try RelayTracing(
            settings: configuration.tracing, instance: configuration.instance, version: RelayVersion.current, logger: logger,
            dropped: { drop, count in metrics.spansDropped(reason: drop.rawValue, count: count) })
        if configuration.tracing.exporter == .otlp {
            // The series exist from the start, so rate() and the alert see the first drop.
            for drop in OTLPExporter.Drop.allCases { metrics.spansDropped(reason: drop.rawValue, count: 0) }
        }
        return tracing
    }

    static func transport(_ configuration: ServerConfiguration, metrics: RelayMetrics) -> HTTP2Transport {
        var transportConfiguration = HTTP2Transport.Configuration()
        transportConfiguration.connectionsPerOrigin = configuration.apns.connectionsPerOrigin
        transportConfiguration.caFile = configuration.apns.caFile
        return HTTP2Transport(configuration: transportConfiguration) { _, event in metrics.connectionEvent(event.rawValue) }
    }

    /// The writer, its spool opened; its threads start with the relay.
    static func auditWriter(_ configuration: ServerConfiguration, logger: Logger) throws -> AuditWriter {
        let audit = configuration.audit
        var writerConfiguration = AuditWriter.Configuration(
            conninfo: audit.databaseURL ?? "", spoolDirectory: audit.spoolDirectory, relayInstance: configuration.instance)
        writerConfiguration.spoolOnly = audit.databaseURL == nil
        writerConfiguration.batchSize = audit.batchSize
        writerConfiguration.flushInterval = Double(audit.flushIntervalMilliseconds) / 1000
        writerConfiguration.retentionDays = audit.retentionDays
        writerConfiguration.journalSync = audit.journalSync
        writerConfiguration.journalSyncInterval = Double(audit.journalSyncIntervalMilliseconds) / 1000
        writerConfiguration.postgresTimeout = audit.postgresTimeout
        do {
            return try AuditWriter(opening: writerConfiguration, logger: logger)
        } catch {
            throw ConfigurationError(field: "audit.spool_directory", "cannot be used: \(error)")
        }
    }

    static func relayConfiguration(_ configuration: ServerConfiguration) -> RelayConfiguration {
        var relayConfiguration = RelayConfiguration(apps: configuration.apps)
        relayConfiguration.retryPolicy = configuration.retry
        relayConfiguration.requestTimeout = configuration.apns.requestTimeoutSeconds
        relayConfiguration.sendDeadline = configuration.apns.sendDeadlineSeconds
        relayConfiguration.timestampPolicy = configuration.apns.timestampPolicy
        relayConfiguration.maximumTimestampLead = Int64(configuration.apns.timestampMaximumLeadSeconds)
        for (environment, origin) in configuration.apns.origins {
            relayConfiguration.endpointOverrides[environment] = .overriding(send: origin)
        }
        return relayConfiguration
    }

    /// Keys live in the audit database, shared by every relay on it. An
    /// in-flight claim outlives its relay by the send deadline plus a margin.
    static func idempotencyStore(_ configuration: ServerConfiguration, logger: Logger) -> PostgresIdempotencyStore? {
        configuration.audit.databaseURL.map { url in
            PostgresIdempotencyStore(
                conninfo: url, windowSeconds: configuration.ingress.idempotencyWindowSeconds,
                leaseSeconds: configuration.apns.sendDeadlineSeconds + 30, bound: configuration.audit.postgresWaitBound,
                logger: logger,
                now: configuration.ingress.idempotencyClock)
        }
    }

    static func ingress(
        _ configuration: ServerConfiguration, service: RelayService, audit: AuditWriter, idempotency: PostgresIdempotencyStore?,
        tracing: RelayTracing, metrics: RelayMetrics, logger: Logger
    ) -> Ingress {
        var ingressConfiguration = Ingress.Configuration()
        ingressConfiguration.maximumBatchItems = configuration.ingress.maximumBatchItems
        ingressConfiguration.maximumConcurrentRequests = configuration.ingress.maximumConcurrentRequests
        ingressConfiguration.maximumSendsInFlight = configuration.ingress.maximumSendsInFlight
        ingressConfiguration.maximumBatchSendsRunning = configuration.ingress.maximumBatchSendsRunning
        ingressConfiguration.batchConcurrency = configuration.ingress.batchConcurrency
        ingressConfiguration.batchDeadlineSeconds = configuration.ingress.batchDeadlineSeconds
        ingressConfiguration.instance = configuration.instance
        let spoolDirectory = configuration.audit.spoolDirectory
        let behindLimit = configuration.audit.readinessBehindSeconds
        let readiness: @Sendable () -> String? = {
            RelayServer.auditNotReadyReason(
                audit.statistics, spoolDirectory: spoolDirectory, spoolWritable: FileManager.default.isWritableFile(atPath: spoolDirectory),
                behindLimit: behindLimit, now: Date())
        }
        return Ingress(
            configuration: ingressConfiguration, service: service,
            keyring: APIKeyring(keys: configuration.apiKeys),
            deadTokens: configuration.audit.databaseURL.map { AuditDeadTokenSource(conninfo: $0, bound: configuration.audit.postgresWaitBound, logger: logger) },
            tracer: tracing.tracer, logger: logger, readiness: readiness,
            observer: { route, status, seconds in metrics.ingressRequest(route: route, status: status, seconds: seconds) },
            idempotency: idempotency, onReplay: { app in metrics.idempotentReplay(app: app) })
    }

    /// `/metrics`, `/healthz` and `/readyz`, reading the components as they run.
    static func metricsRouter(
        metrics: RelayMetrics, service: RelayService, transport: HTTP2Transport, audit: AuditWriter, ingress: Ingress,
        listener: IngressListener
    ) -> Router {
        var router = Router()
        var sources = MetricSources(
            clockSkewSeconds: { service.clockSkew.latestSkewSeconds }, retryDisabled: { service.killSwitch.isEngaged },
            inflightStreams: { transport.inFlight }, audit: { RelayServer.auditSnapshot(audit.statistics) },
            connections: { transport.connectionStates })
        sources.ingressInFlight = { ingress.requestsInFlight }
        // Zero until the ingress listener has started.
        sources.ingressRequestsTimedOut = { listener.requestsTimedOut }
        sources.ingressSendsAdmitted = { ingress.sendsAdmitted }
        sources.ingressBatchSendsRunning = { ingress.batchSendsRunning }
        sources.ingressNotSent = { ingress.batchSendsNotSent }
        // Every reason from the start (0s), once the HTTP/2 ingress listens.
        sources.apnsIngressConnectionsRefused = {
            guard let server = listener.apnsIngressServer?.server else { return [:] }
            return Dictionary(uniqueKeysWithValues: server.refusedConnectionsByReason.map { ($0.key.rawValue, $0.value) })
        }
        MetricsEndpoint(
            metrics: metrics,
            sources: sources,
            buildInfo: RelayServer.buildInfo,
            readiness: { ingress.notReadyReason }
        ).install(on: &router)
        return router
    }
}
