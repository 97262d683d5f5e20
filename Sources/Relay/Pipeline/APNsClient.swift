public import APNs
public import Instrumentation
public import Logging
public import Tracing

/// Sends built requests for one app in one environment: signs them, carries
/// them over the transport, retries what is worth retrying, and reports
/// every attempt and every finished send.
///
/// One client per (key, environment, bundle id), as APNs scopes provider
/// tokens and channels; it owns that tuple's JWT cache through its
/// ``AuthorizationProvider``.
public final class APNsClient: Sendable {
    /// Settings of one client.
    public struct Configuration: Sendable {
        /// The app's name in configuration, metrics and the audit.
        public var app: String
        public var environment: Environment
        public var endpoints: APNsEndpoints
        public var retryPolicy: RetryPolicy = RetryPolicy()
        /// Per-attempt answer timeout, seconds.
        public var requestTimeout: Double = 10
        /// Whole-send budget including backoff, seconds.
        public var sendDeadline: Double = 30

        public init(app: String, environment: Environment, endpoints: APNsEndpoints) {
            self.app = app
            self.environment = environment
            self.endpoints = endpoints
        }
    }

    public let configuration: Configuration
    let transport: any APNsTransport
    let authorization: any AuthorizationProvider
    let killSwitch: KillSwitch
    /// Split once here into durable and plain (``RelayObservers``), not per send.
    let observers: RelayObservers
    let tracer: any Tracer
    /// Starts the send spans: the tracer asked once here whether it is one
    /// of the relay's own, so a send casts none of its spans.
    let spans: SpanStarter
    let logger: Logger
    /// The logger's handler when it writes a line from sorted fields (the
    /// relay's JSON handler): asked once here, not cast per send.
    let sortedFieldsLogger: (any SortedFieldsLogging)?
    let clockSkew: ClockSkewMonitor?
    let sleep: @Sendable (Double) async throws -> Void

    public init(
        configuration: Configuration, transport: any APNsTransport, authorization: any AuthorizationProvider,
        killSwitch: KillSwitch, observers: [any RelayObserver] = [], tracer: any Tracer, logger: Logger,
        clockSkew: ClockSkewMonitor? = nil,
        sleep: @escaping @Sendable (Double) async throws -> Void = { seconds in
            try await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1_000_000_000))
        }
    ) {
        self.configuration = configuration
        self.transport = transport
        self.authorization = authorization
        self.killSwitch = killSwitch
        self.observers = RelayObservers(observers)
        self.tracer = tracer
        self.spans = SpanStarter(tracer)
        self.logger = logger
        self.sortedFieldsLogger = logger.handler as? any SortedFieldsLogging
        self.clockSkew = clockSkew
        self.sleep = sleep
    }
}

/// Caller-side facts about a send that the request itself does not carry.
public struct SendContext: Sendable {
    public var snapshotID: String?
    public var surfaceID: String?
    /// The API key name of the backend that asked.
    public var caller: String?
    /// The instrumentation context to parent the send's span on (carries an
    /// extracted `traceparent`). Defaults to the task's current context.
    public var instrumentation: InstrumentationContext?
    /// SHA-256 hex of the caller and its `Idempotency-Key`, for the audit row.
    public var idempotencyKeyHash: String?

    public init(
        snapshotID: String? = nil, surfaceID: String? = nil, caller: String? = nil,
        instrumentation: InstrumentationContext? = nil, idempotencyKeyHash: String? = nil
    ) {
        self.snapshotID = snapshotID
        self.surfaceID = surfaceID
        self.caller = caller
        self.instrumentation = instrumentation
        self.idempotencyKeyHash = idempotencyKeyHash
    }
}
