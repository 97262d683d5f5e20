public import Audit
import Foundation
import Synchronization
import HTTP2
public import HTTPServer
public import Ingress
public import Logging
public import Relay
public import Telemetry
import RelayBasics
import Tracing

/// The relay as `apns-relay serve` runs it: the relay service on an HTTP/2
/// pool, the audit writer, the ingress and the metrics listener, wired from
/// one ``ServerConfiguration``, run as the parts of one swift-service-lifecycle
/// `ServiceGroup` with an orderly drain (`RelayServer+Lifecycle.swift`).
public final class RelayServer: Sendable {
    public let configuration: ServerConfiguration
    public let service: RelayService
    public let ingress: Ingress
    public let audit: AuditWriter
    public let metrics: RelayMetrics
    /// The `Idempotency-Key` store; nil without an audit database (keyed sends are then refused).
    public let idempotency: PostgresIdempotencyStore?
    /// Deletes expired idempotency keys now and then, as one of the parts:
    /// it runs only once the relay has started.
    let purge: IdempotencyPurge?
    let transport: HTTP2Transport
    let ingressServer: HTTPServer
    let metricsServer: HTTPServer
    /// The APNs-compatible HTTP/2 listener (`apns_ingress:`), when configured.
    let apnsIngressServer: APNsIngressListener?
    let tracing: RelayTracing
    let logger: Logger
    /// The parts' group, once started (see `RelayServer+Lifecycle.swift`).
    let lifecycle = RelayLifecycle()

    /// Where the ingress listens (the real port when the configuration said 0).
    public var ingressAddress: ServerConfiguration.Address { .init(host: configuration.ingress.listen.host, port: ingressServer.port) }
    public var metricsAddress: ServerConfiguration.Address { .init(host: configuration.metrics.listen.host, port: metricsServer.port) }
    /// Where the HTTP/2 APNs ingress listens (the real port), or nil when it is off.
    public var apnsIngressAddress: ServerConfiguration.Address? {
        guard let server = apnsIngressServer, let listen = configuration.apnsIngress.listen else { return nil }
        return .init(host: listen.host, port: UInt16(server.port))
    }

    /// Applies migrations when configured, loads every key, opens the spool
    /// (a crash's leftovers replay in the background), starts both listeners
    /// and the group of the relay's parts.
    ///
    /// - Throws: ``ConfigurationError`` for what the configuration got wrong,
    ///   or the credential error of the first app whose key cannot be used.
    /// - Parameter recordsAudit: false leaves the audit writer out of the send
    ///   path. Only benchmarks use it, to measure what the audit costs
    ///   (`bench ingress`, and `serve --benchmark-without-audit` for
    ///   scripts/bench); `serve` otherwise always audits.
    /// - Parameter drainingOnSignals: true: SIGTERM and SIGINT drain the relay
    ///   (the group's `gracefulShutdownSignals`; `serve`). Otherwise only ``drain()`` does.
    public init(
        configuration: ServerConfiguration, logger: Logger, killSwitch: KillSwitch = KillSwitch(), recordsAudit: Bool = true,
        drainingOnSignals: Bool = false
    ) async throws {
        self.configuration = configuration
        let metrics = RelayMetrics()
        self.metrics = metrics
        let tracing = try RelayTracing(
            settings: configuration.tracing, instance: configuration.instance, version: RelayVersion.current, logger: logger,
            dropped: { drop, count in metrics.spansDropped(reason: drop.rawValue, count: count) })
        self.tracing = tracing
        // OTEL_* values the relay ignored (the specification's "warn and ignore").
        for warning in configuration.tracing.environmentWarnings { logger.warning("\(warning)", metadata: ["setting": "tracing.exporter"]) }
        for warning in tracing.warnings { logger.warning("\(warning)", metadata: ["setting": "tracing"]) }
        if configuration.tracing.exporter == .otlp {
            // The series exist from the start, so rate() and the alert see the first drop.
            for drop in OTLPExporter.Drop.allCases { metrics.spansDropped(reason: drop.rawValue, count: 0) }
        }
        // Log lines written inside a span carry its trace id, whichever tracer made it.
        var logger = logger
        logger.handler.metadataProvider = tracing.metadataProvider
        self.logger = logger
        if let url = configuration.audit.databaseURL, configuration.audit.migrateOnStart {
            await Self.migrate(conninfo: url, logger: logger)
        }

        var transportConfiguration = HTTP2Transport.Configuration()
        transportConfiguration.connectionsPerOrigin = configuration.apns.connectionsPerOrigin
        transportConfiguration.caFile = configuration.apns.caFile
        transport = HTTP2Transport(configuration: transportConfiguration) { _, event in metrics.connectionEvent(event.rawValue) }

        var auditConfiguration = AuditWriter.Configuration(
            conninfo: configuration.audit.databaseURL ?? "", spoolDirectory: configuration.audit.spoolDirectory,
            relayInstance: configuration.instance)
        auditConfiguration.spoolOnly = configuration.audit.databaseURL == nil
        auditConfiguration.batchSize = configuration.audit.batchSize
        auditConfiguration.flushInterval = Double(configuration.audit.flushIntervalMilliseconds) / 1000
        auditConfiguration.retentionDays = configuration.audit.retentionDays
        auditConfiguration.journalSync = configuration.audit.journalSync
        auditConfiguration.journalSyncInterval = Double(configuration.audit.journalSyncIntervalMilliseconds) / 1000
        do {
            audit = try AuditWriter(configuration: auditConfiguration, logger: logger)
        } catch {
            throw ConfigurationError(field: "audit.spool_directory", "cannot be used: \(error)")
        }

        var relayConfiguration = RelayConfiguration(apps: configuration.apps)
        relayConfiguration.retryPolicy = configuration.retry
        relayConfiguration.requestTimeout = configuration.apns.requestTimeoutSeconds
        relayConfiguration.sendDeadline = configuration.apns.sendDeadlineSeconds
        relayConfiguration.timestampPolicy = configuration.apns.timestampPolicy
        relayConfiguration.maximumTimestampLead = Int64(configuration.apns.timestampMaximumLeadSeconds)
        for (environment, origin) in configuration.apns.origins {
            relayConfiguration.endpointOverrides[environment] = .overriding(send: origin)
        }
        let tracer = tracing.tracer
        do {
            service = try RelayService(
                configuration: relayConfiguration, transport: transport, killSwitch: killSwitch,
                observers: recordsAudit ? [metrics, audit] : [metrics],
                tracer: tracer, logger: logger, jwtMinted: { app, issuedAt in metrics.jwtMinted(app: app, issuedAt: issuedAt) })
        } catch {
            await audit.shutdown()
            throw error
        }

        var ingressConfiguration = Ingress.Configuration()
        ingressConfiguration.maximumBatchItems = configuration.ingress.maximumBatchItems
        ingressConfiguration.maximumConcurrentRequests = configuration.ingress.maximumConcurrentRequests
        ingressConfiguration.maximumSendsInFlight = configuration.ingress.maximumSendsInFlight
        ingressConfiguration.maximumBatchSendsRunning = configuration.ingress.maximumBatchSendsRunning
        ingressConfiguration.batchConcurrency = configuration.ingress.batchConcurrency
        ingressConfiguration.batchDeadlineSeconds = configuration.ingress.batchDeadlineSeconds
        ingressConfiguration.instance = configuration.instance
        let audit = audit
        let spoolDirectory = configuration.audit.spoolDirectory
        let behindLimit = configuration.audit.readinessBehindSeconds
        let readiness: @Sendable () -> String? = {
            Self.auditNotReadyReason(
                audit.statistics, spoolDirectory: spoolDirectory, spoolWritable: FileManager.default.isWritableFile(atPath: spoolDirectory),
                behindLimit: behindLimit, now: Date())
        }
        // Keys live in the audit database, shared by every relay on it. An
        // in-flight claim outlives its relay by the send deadline plus a margin.
        let idempotency = configuration.audit.databaseURL.map { url in
            PostgresIdempotencyStore(
                conninfo: url, windowSeconds: configuration.ingress.idempotencyWindowSeconds,
                leaseSeconds: configuration.apns.sendDeadlineSeconds + 30, logger: logger,
                now: configuration.ingress.idempotencyClock)
        }
        self.idempotency = idempotency
        ingress = Ingress(
            configuration: ingressConfiguration, service: service,
            keyring: APIKeyring(keys: configuration.apiKeys),
            deadTokens: configuration.audit.databaseURL.map { AuditDeadTokenSource(conninfo: $0, logger: logger) },
            tracer: tracer, logger: logger, readiness: readiness,
            observer: { route, status, seconds in metrics.ingressRequest(route: route, status: status, seconds: seconds) },
            idempotency: idempotency, onReplay: { app in metrics.idempotentReplay(app: app) })
        purge = idempotency.map { IdempotencyPurge(store: $0, interval: configuration.ingress.idempotencyPurgeIntervalSeconds, logger: logger) }

        var ingressRouter = Router()
        ingress.install(on: &ingressRouter)
        var ingressServerConfiguration = HTTPServer.Configuration()
        ingressServerConfiguration.host = configuration.ingress.listen.host
        ingressServerConfiguration.port = configuration.ingress.listen.port
        ingressServerConfiguration.maximumBodyBytes = configuration.ingress.maximumBodyBytes
        ingressServerConfiguration.connectionTimeoutSeconds = configuration.ingress.connectionTimeoutSeconds
        ingressServerConfiguration.requestTimeoutSeconds = configuration.ingress.requestTimeoutSeconds
        ingressServerConfiguration.connectionsPerClientLimit = configuration.ingress.maximumConnectionsPerClient
        ingressServerConfiguration.connectionLimit = max(64, configuration.ingress.maximumConcurrentRequests * 2)
        // Every connection libmicrohttpd accepts is a descriptor; with room
        // for the APNs, Postgres, metrics and journal ones beside them.
        let descriptorsNeeded = HTTPServer.acceptLimit(ingressServerConfiguration.connectionLimit) + 1024
        let descriptorLimit = FileDescriptorLimit.raise(toAtLeast: descriptorsNeeded)
        if descriptorLimit < descriptorsNeeded {
            logger.warning("the open-file limit is below what the ingress connection limit needs; accept may fail before shedding makes room", metadata: [
                "open_file_limit": "\(descriptorLimit)", "needed": "\(descriptorsNeeded)",
            ])
        }
        ingressServerConfiguration.threads = configuration.ingress.threads
        // The ingress words the server's own errors and stamps every answer's traceparent.
        ingress.prepare(&ingressServerConfiguration)

        let ingress = ingress
        let service = service
        let transport = transport
        var metricsRouter = Router()
        var sources = MetricSources(
            clockSkewSeconds: { service.clockSkew.latestSkewSeconds }, retryDisabled: { service.killSwitch.isEngaged },
            inflightStreams: { transport.inFlight }, audit: { Self.auditSnapshot(audit.statistics) },
            connections: { transport.connectionStates })
        sources.ingressInFlight = { ingress.requestsInFlight }
        // The ingress server starts after the metrics listener; until then it has cut nothing.
        let ingressServerBox = LateServer()
        sources.ingressRequestsTimedOut = { ingressServerBox.server.withLock { $0?.requestsTimedOut } ?? 0 }
        sources.ingressSendsAdmitted = { ingress.sendsAdmitted }
        sources.ingressBatchSendsRunning = { ingress.batchSendsRunning }
        sources.ingressNotSent = { ingress.batchSendsNotSent }
        MetricsEndpoint(
            metrics: metrics,
            sources: sources,
            buildInfo: Self.buildInfo,
            readiness: { ingress.notReadyReason }
        ).install(on: &metricsRouter)
        var metricsServerConfiguration = HTTPServer.Configuration()
        metricsServerConfiguration.host = configuration.metrics.listen.host
        metricsServerConfiguration.port = configuration.metrics.listen.port
        metricsServerConfiguration.threads = 1

        do {
            metricsServer = try HTTPServer(configuration: metricsServerConfiguration, router: metricsRouter)
        } catch {
            await audit.shutdown()
            throw ConfigurationError(field: "metrics.listen", "cannot listen on \(configuration.metrics.listen): \(error)")
        }
        do {
            let ingressServer = try HTTPServer(configuration: ingressServerConfiguration, router: ingressRouter)
            self.ingressServer = ingressServer
            ingressServerBox.server.withLock { $0 = ingressServer }
        } catch {
            await metricsServer.stop(drainTimeout: 0)
            await audit.shutdown()
            throw ConfigurationError(field: "ingress.listen", "cannot listen on \(configuration.ingress.listen): \(error)")
        }
        do {
            apnsIngressServer = try Self.startAPNsIngress(configuration.apnsIngress, ingress: ingress)
        } catch {
            await ingressServer.stop(drainTimeout: 0)
            await metricsServer.stop(drainTimeout: 0)
            await audit.shutdown()
            throw ConfigurationError(field: "apns_ingress.listen", "cannot serve on \(configuration.apnsIngress.listen.map(\.description) ?? ""): \(error)")
        }
        logger.info("apns-relay serving", metadata: [
            "apns_ingress": "\(apnsIngressServer.map { "\(configuration.apnsIngress.listen?.host ?? ""):\($0.port)" } ?? "off")",
            "ingress": "\(configuration.ingress.listen.host):\(ingressServer.port)",
            "metrics": "\(configuration.metrics.listen.host):\(metricsServer.port)",
            "apps": "\(service.appNames.joined(separator: ","))",
            "audit": "\(configuration.audit.databaseURL == nil ? "spool only" : "postgres + spool")",
            "instance": "\(configuration.instance)",
        ])
        let clock = DrainClock()
        await lifecycle.start(signals: drainingOnSignals, drainTimeout: configuration.drainTimeoutSeconds, logger: logger) { started in
            parts(clock: clock, started: started)
        }
    }

    /// Why the audit keeps this relay out of rotation, or nil. Readiness as a
    /// whole (draining first) is ``Ingress/notReadyReason``, served by both
    /// listeners' `/readyz`.
    static func auditNotReadyReason(
        _ statistics: AuditStatistics, spoolDirectory: String, spoolWritable: Bool, behindLimit: Double, now: Date
    ) -> String? {
        guard statistics.connected || spoolWritable else {
            return "the audit log can be written neither to Postgres nor to the spool (\(spoolDirectory))"
        }
        // Sends are refused (503) meanwhile: a relay that cannot make its
        // sends durable takes none, and leaves rotation so others take them.
        if let problem = statistics.durabilityProblem {
            return "\(problem) (\(spoolDirectory)); sends are refused until it can"
        }
        // Rows are safe on disk either way. When Postgres answers and this
        // relay's rows still do not land, the fault is local: take it out
        // of rotation. A Postgres outage does not fail readiness (every
        // relay would leave rotation and sends would stop); the alert
        // APNsRelayAuditBehind pages for both.
        if statistics.stuckWhileReachable(limit: behindLimit, now: now) {
            return "the audit has not reached Postgres for \(Int(statistics.behindSeconds(now: now))) s although Postgres answers (rows wait in the spool; see the writer's log)"
        }
        return nil
    }

    static func auditSnapshot(_ statistics: AuditStatistics) -> AuditSnapshot {
        var snapshot = AuditSnapshot(
            queueDepth: statistics.queueDepth, spoolBytes: statistics.spoolBytes, connected: statistics.connected,
            written: statistics.written, spooled: statistics.spooled, replayed: statistics.replayed, dropped: statistics.dropped)
        snapshot.quarantined = statistics.quarantined
        snapshot.behindSeconds = statistics.behindSeconds()
        return snapshot
    }


    /// Labels of `apns_relay_build_info`: the relay's version and each C
    /// library's version as loaded at run time.
    public static var buildInfo: [(String, String)] {
        [
            ("version", RelayVersion.current), ("nghttp2", HTTP2LibraryVersions.nghttp2), ("openssl", HTTP2LibraryVersions.openssl),
            ("libpq", AuditLibraryVersions.libpq), ("libmicrohttpd", HTTPServer.libmicrohttpdVersion), ("zlib", HTTPServer.zlibVersion),
        ]
    }

    /// Applies the migrations off the cooperative pool; a failure is logged
    /// and the relay starts anyway (rows wait in the spool until the database
    /// is back and migrated).
    static func migrate(conninfo: String, logger: Logger) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                do {
                    let report = try Migrator().apply(conninfo: conninfo, logger: logger)
                    logger.info("audit schema migrated", metadata: ["applied": "\(report.applied.joined(separator: ","))", "already": "\(report.alreadyApplied.count)"])
                } catch {
                    logger.error("audit migrations could not be applied at start-up; rows are spooled until Postgres is back and migrated", metadata: ["error": "\(error)"])
                }
                continuation.resume()
            }
        }
    }
}

/// The relay's own version.
public enum RelayVersion {
    public static let current = "0.1.0"
}

/// A server a closure needs before it exists (the metrics sources are
/// installed before the ingress server starts).
private final class LateServer: Sendable {
    let server = Mutex<HTTPServer?>(nil)
}
