public import APNs
public import Audit
public import Ingress
public import Relay

/// Everything `apns-relay serve` reads from its YAML file and environment,
/// with the defaults documented in `deploy/apns-relay.example.yaml`.
public struct ServerConfiguration: Sendable {
    /// `host:port` of a listener.
    public struct Address: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: UInt16
        public init(host: String, port: UInt16) {
            self.host = host
            self.port = port
        }
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    public struct IngressSettings: Sendable {
        public var listen = Address(host: "127.0.0.1", port: 8080)
        public var maximumBodyBytes = 1 << 20
        public var maximumBatchItems = 1000
        public var maximumConcurrentRequests = 1024
        /// Sends admitted and unfinished across the relay (a batch counts whole).
        public var maximumSendsInFlight = 100_000
        /// Sends of all batches running at once.
        public var maximumBatchSendsRunning = 512
        /// Sends of one batch running at once; nil: an eighth of `maximumBatchSendsRunning`.
        public var batchConcurrency: Int?
        /// Seconds a batch may run before its unstarted sends are answered NotSent.
        public var batchDeadlineSeconds = 30.0
        /// Seconds an `Idempotency-Key` holds its first send's answer.
        public var idempotencyWindowSeconds = 86_400.0
        /// The idempotency store's clock (unix ms). Not a YAML setting: tests
        /// move it past the window instead of waiting.
        public var idempotencyClock: (@Sendable () -> Int64)?
        /// Seconds between purges of expired idempotency keys. Not a YAML
        /// setting: tests shorten it to see the purge run (or not).
        public var idempotencyPurgeIntervalSeconds = 60.0
        public var connectionTimeoutSeconds = 30
        /// Seconds a client has to send one whole request (slowloris bound).
        public var requestTimeoutSeconds = 15
        /// Connections open at once from one client address; 0: no cap.
        public var maximumConnectionsPerClient = 256
        /// libmicrohttpd's polling threads. One: measured on 2 cores it costs
        /// no more CPU per send than two at 8 client connections and up to 6%
        /// less at 64 (docs/performance.md, "`ingress.threads`: 1 by default").
        public var threads = 1
    }

    /// `apns_ingress:`: the APNs-compatible HTTP/2 listener (off unless `listen` is set).
    public struct APNsIngressSettings: Sendable {
        /// Where it listens; nil: no listener.
        public var listen: Address?
        /// TLS with ALPN h2 (certificate and key below); false: cleartext
        /// HTTP/2 with prior knowledge, for loopback or a service mesh.
        public var tls = true
        public var certificateFile: String?
        public var privateKeyFile: String?
        /// CAs whose TLS client certificates stand for API keys
        /// (`client_certificate` of an `api_keys` entry); nil: none asked for.
        public var clientCAFile: String?
        /// The APNs environment this listener plays (APNs has a host for
        /// each); nil: the app's only one.
        public var environment: Environment?
        /// SETTINGS_MAX_CONCURRENT_STREAMS per connection.
        public var maximumConcurrentStreams = 100
        /// Bytes of one request's header block (SETTINGS_MAX_HEADER_LIST_SIZE), else 431.
        public var maximumHeaderListBytes = 16_384
        /// Bytes of one request's body, else 413 PayloadTooLarge (APNs' largest payload is 5 KB).
        public var maximumBodyBytes = 16_384
        /// Connections at once from one client address.
        public var maximumConnectionsPerClient = 16
        /// Connections at once in all.
        public var maximumConnections = 1024
        /// Seconds a request may take to arrive whole; a slower stream is reset.
        public var requestTimeoutSeconds = 10.0
    }

    public struct MetricsSettings: Sendable {
        public var listen = Address(host: "127.0.0.1", port: 9464)
    }

    public struct APNsSettings: Sendable {
        public var connectionsPerOrigin = 2
        public var requestTimeoutSeconds = 10.0
        public var sendDeadlineSeconds = 30.0
        public var timestampPolicy = TimestampPolicy.reject
        /// Seconds a Live Activity timestamp may lie past the relay's clock.
        public var timestampMaximumLeadSeconds = Int(Preflight.defaultTimestampLead)
        /// Hosts that replace Apple's per environment (tests, the demo's mock).
        public var origins: [Environment: Origin] = [:]
        /// A CA bundle to trust for `origins`: tests and the mock only.
        public var caFile: String?
    }

    public struct AuditSettings: Sendable {
        /// libpq connection string or URL; nil: rows stay in the spool.
        public var databaseURL: String?
        public var spoolDirectory = "/var/lib/apns-relay/spool"
        public var migrateOnStart = true
        public var retentionDays: Int? = 30
        public var batchSize = 500
        public var flushIntervalMilliseconds = 50
        /// When a send's journal record counts as durable (`audit.journal_sync`).
        public var journalSync = AuditWriter.JournalSync.interval
        /// `interval`: milliseconds between the journal's `fdatasync`s.
        public var journalSyncIntervalMilliseconds = 10
        /// Seconds the relay waits on Postgres for a connect or one
        /// statement (`audit.postgres_timeout_ms`): the audit writer, the
        /// idempotency keys and the dead-token feed.
        public var postgresTimeout = 10.0

        /// ``postgresTimeout`` as the bound each Postgres connection of the relay is opened with.
        public var postgresWaitBound: PostgresWaitBound { PostgresWaitBound(seconds: postgresTimeout) }
        /// `/readyz` fails once audit rows have waited this long for the
        /// configured Postgres while it accepts connections (the alert
        /// APNsRelayAuditBehind uses the same 120 s). Not a YAML setting:
        /// tests shorten it.
        public var readinessBehindSeconds = 120.0
    }

    /// Where finished spans go (`tracing:`). The standard `OTEL_*`
    /// variables win over these: `OTEL_TRACES_EXPORTER` and `OTEL_SDK_DISABLED`
    /// choose the exporter, the others (endpoint, headers, service name,
    /// resource attributes, sampler, batching) are read when the OTLP exporter
    /// starts (`OTLPExportSettings`).
    public struct TracingSettings: Sendable {
        public enum Exporter: String, Sendable, CaseIterable {
            /// OTLP/HTTP with protobuf to a collector, batched in the background.
            case otlp
            /// One JSON log line per span on standard error (the default): at `logging.level: debug`.
            case log
            /// No spans anywhere; trace ids still reach the audit and the logs.
            case none
        }
        public var exporter = Exporter.log
        /// What chose ``exporter``: the file, `OTEL_TRACES_EXPORTER` or
        /// `OTEL_SDK_DISABLED` (`TracingSettings+Environment.swift`).
        public var exporterSource = ExporterSource.file
        /// What the `OTEL_*` exporter variables said that the relay ignored:
        /// logged at warning when the relay starts, printed by check-config.
        public var environmentWarnings: [String] = []
        /// The OTLP/HTTP base URL (`/v1/traces` is appended); nil: the
        /// specification's default, http://localhost:4318, unless OTEL_EXPORTER_OTLP_ENDPOINT says otherwise.
        public var endpoint: String?
        /// The share of new traces recorded (0...1).
        public var samplingRatio = 1.0
        /// A caller's sampled flag in `traceparent` decides for its trace.
        public var parentBased = true
        /// Spans waiting for export at most; past it they are dropped and counted.
        public var maximumQueueSize = 2048
        /// Spans per OTLP request at most.
        public var maximumExportBatchSize = 512
        /// How often the queue is exported (milliseconds).
        public var scheduleDelayMilliseconds = 1000
        /// How long one export may take before its spans are dropped (milliseconds).
        public var exportTimeoutMilliseconds = 10_000

        public init() {}
    }

    public var instance: String
    public var ingress = IngressSettings()
    public var metrics = MetricsSettings()
    public var apnsIngress = APNsIngressSettings()
    public var apns = APNsSettings()
    public var retry = RetryPolicy()
    public var apps: [AppConfiguration] = []
    public var apiKeys: [APIKey] = []
    public var audit = AuditSettings()
    public var tracing = TracingSettings()
    public var drainTimeoutSeconds = 25.0
    public var logLevel = "info"
    /// Where the file was read from, for relative key paths and messages.
    public var sourceFile: String?

    public init(instance: String) { self.instance = instance }
}

/// A configuration problem: which setting, and what is wrong with it.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    /// The setting's path (`apps[0].key_path`) or environment variable.
    public var field: String
    public var message: String

    public init(field: String, _ message: String) {
        self.field = field
        self.message = message
    }

    public var description: String { "\(field): \(message)" }
}
