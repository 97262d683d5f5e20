public import HTTPServer
import Instrumentation
public import Logging
public import Relay
import RelayJSON
import Synchronization
public import Tracing
import RelayBasics

/// The backend-facing API (docs/api.md): sends, batches, describe, channels,
/// the dead-token feed, an APNs-compatible `/3/device/{token}`, and the
/// runtime kill switch.
///
/// Every route is declared once in ``routes``; every API request is
/// authenticated by API key, limited (concurrency, per-key rate), traced (an
/// incoming `traceparent` becomes the parent; the answer carries the relay's
/// own) and counted by route and status, by the steps ``IngressSteps``
/// declares in their one order.
public final class Ingress: Sendable {
    /// Limits of the API.
    public struct Configuration: Sendable {
        /// Items in one `POST /v1/send/batch`.
        public var maximumBatchItems = 1000
        /// Sends in one batch after `tokens` fan-out.
        public var maximumBatchSends = 10_000
        /// Requests handled at once; beyond it: 503 with Retry-After.
        public var maximumConcurrentRequests = 1024
        /// Sends of one batch in flight at once (`ingress.batch_concurrency`);
        /// nil: an eighth of ``maximumBatchSendsRunning`` (64 of the default 512).
        ///
        /// It follows the lanes instead of a fixed 64, so raising
        /// `max_batch_sends_running` with the APNs connections raises what
        /// one batch can keep in flight (at 100 ms per APNs round trip a
        /// 1000-send batch at 64 took 1.6 s however many streams were free).
        /// Not all the lanes: eight batches at once fill them without
        /// waiting on each other, and measured with eight 1000-send batches
        /// at once, letting each take every lane raised the relay's CPU per
        /// send from about 120 to about 148 µs (docs/performance.md, "The
        /// batch route").
        public var batchConcurrency: Int?
        /// Sends admitted and not yet finished across every request (a batch
        /// counts all of its sends from admission); beyond it: 503 Overloaded
        /// with Retry-After, and a batch that does not fit is refused whole.
        public var maximumSendsInFlight = 100_000
        /// Sends of all batches running at once (each batch at most
        /// ``batchConcurrency`` of them); kept below the APNs connections' stream
        /// limit so single sends never queue behind batches.
        public var maximumBatchSendsRunning = 512
        /// Seconds a batch may run: items not started by then are answered
        /// `NotSent`, items still running are cancelled. Below the client
        /// timeout docs/api.md recommends (35 s).
        public var batchDeadlineSeconds = 30.0
        /// This relay's instance name (`instance`, the audit's `relay_instance`):
        /// state an answer describes for this process only, such as the runtime
        /// kill switch, names the instance it belongs to.
        public var instance = ""

        public init() {}

        /// ``batchConcurrency``, or an eighth of the lanes when it is not set; at least 1.
        var effectiveBatchConcurrency: Int { max(1, min(batchConcurrency ?? maximumBatchSendsRunning / 8, maximumBatchSendsRunning)) }
    }

    /// Called once per answered request (metrics): the route pattern, the status, seconds taken.
    public typealias RequestObserver = @Sendable (_ route: String, _ status: Int, _ seconds: Double) -> Void

    let configuration: Configuration
    let service: RelayService
    let keyring: APIKeyring
    let tracer: any Tracer
    let logger: Logger
    /// Every step between the router and a handler, in their declared order.
    let steps: IngressSteps
    /// Runs admitted batches: the send budget, the lanes, the deadlines, the drain's window.
    let batches: BatchRunner
    /// Keyed sends: the `Idempotency-Key` store, answers it could not record yet, replays.
    let idempotency: IdempotencyGate
    /// What the route table binds its rows to.
    let controllers: IngressControllers

    /// Stops recording held idempotency answers (the drain); returns how many were left.
    public func stopSettlingKeys() -> Int { idempotency.stopSettling() }
    /// Sends admitted and not yet finished across every request.
    var sendBudget: SendBudget { batches.budget }

    public init(
        configuration: Configuration = Configuration(), service: RelayService, keyring: APIKeyring,
        deadTokens: (any DeadTokenSource)?, tracer: any Tracer, logger: Logger,
        readiness: @escaping @Sendable () -> String? = { nil }, observer: RequestObserver? = nil,
        idempotency: (any IdempotencyStore)? = nil, onReplay: (@Sendable (_ app: String) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.service = service
        self.keyring = keyring
        self.tracer = tracer
        self.logger = logger
        let idempotency = IdempotencyGate(store: idempotency, onReplay: onReplay, logger: logger)
        self.idempotency = idempotency
        let steps = IngressSteps(
            observer: observer, tracer: tracer, waitUntilRecorded: { [service] in await service.waitUntilRecorded() },
            maximumConcurrentRequests: configuration.maximumConcurrentRequests, keyring: keyring, limiter: RateLimiter())
        self.steps = steps
        let drain = steps.drain
        let batches = BatchRunner(configuration: configuration, service: service, idempotency: idempotency, drain: drain)
        self.batches = batches
        let send = SendController(service: service, batches: batches, idempotency: idempotency)
        controllers = IngressControllers(
            send: send,
            batch: BatchController(configuration: configuration, service: service, sends: send, limiter: steps.limiter, logger: logger),
            channels: ChannelController(service: service, sends: send),
            deadTokens: DeadTokenController(deadTokens: deadTokens, service: service, logger: logger),
            admin: AdminController(killSwitch: service.killSwitch, instance: configuration.instance, logger: logger),
            apnsCompatible: APNsCompatibleController(service: service, sends: send),
            probes: HealthProbes { drain.isDraining ? "draining" : readiness() })
    }

    /// Stops taking new work: every later request gets 503 Draining, while
    /// the ones already running finish. Running batches go on starting their
    /// sends for `batchesStartFor` seconds, then answer the rest `NotSent`
    /// (reason `Draining`), so every send of theirs ends with a result before
    /// the drain has to cut anything off.
    public func beginDraining(batchesStartFor seconds: Double = 0) {
        batches.allowStarts(for: seconds)
        steps.drain.close()
    }

    public var isDraining: Bool { steps.drain.isDraining }

    /// Why this relay should not get traffic now (draining, or the
    /// `readiness` check), or nil when it is ready: what `/readyz` answers on
    /// the ingress and on the metrics listener.
    public var notReadyReason: String? { controllers.probes.notReadyReason() }

    /// Requests being handled now.
    public var requestsInFlight: Int { steps.concurrency.inFlight }

    /// Sends admitted and not yet finished (a batch's unstarted sends included).
    public var sendsAdmitted: Int { sendBudget.inUse }

    /// Batch sends running now.
    public var batchSendsRunning: Int { batches.lanes.inUse }

    /// Batch sends never started (answered `NotSent`) since start-up, by reason.
    public var batchSendsNotSent: [String: Int] { batches.notSent.withLock { $0 } }

    /// What a route handler gets: the request, the caller's key, and the span to parent sends on.
    struct Call {
        var request: HTTPRequest
        var key: APIKey
        var span: (any Span)?
        /// Set for a send with an `Idempotency-Key` (its audit row carries it).
        var idempotencyKeyHash: String?
        var context: SendContext {
            SendContext(caller: key.name, instrumentation: span?.context ?? .topLevel, idempotencyKeyHash: idempotencyKeyHash)
        }
    }

    typealias RouteHandler = @Sendable (Call) async throws(IngressError) -> HTTPResponse

    /// The route value the HTTP/2 APNs ingress' sends are counted and traced
    /// under (`route` label of the request metrics): apart from the HTTP/1.1
    /// listener's `/3/device/{token}`, so the two ingresses can be told apart.
    public static let apnsHTTP2Route = APNsCompatibleController.apnsHTTP2Route

    /// The handler of the HTTP/2 APNs-compatible listener (`apns_ingress:`),
    /// served by the ``APNsCompatibleController`` through the API's steps
    /// (``APNsCompatibleController/http2Handler(steps:tracer:keyring:environment:now:)``).
    ///
    /// - Parameters:
    ///   - environment: the APNs environment this listener plays (as APNs
    ///     has one host for each); nil: the app's only one, or the
    ///     `apns-relay-environment` header.
    ///   - now: seconds since the epoch, for provider tokens' age.
    /// - Throws: when a configured provider public key cannot be read.
    public func apnsHTTP2Handler(environment: String?, now: @escaping @Sendable () -> Int64) throws -> HTTPHandler {
        try controllers.apnsCompatible.http2Handler(steps: steps, tracer: tracer, keyring: keyring, environment: environment, now: now)
    }
}
