import HTTPServer
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
    let deadTokens: (any DeadTokenSource)?
    /// Keyed sends: the `Idempotency-Key` store, answers it could not record yet, replays.
    let idempotency: IdempotencyGate

    /// Stops recording held idempotency answers (the drain); returns how many were left.
    public func stopSettlingKeys() -> Int { idempotency.stopSettling() }
    let tracer: any Tracer
    let logger: Logger
    /// Every step between the router and a handler, in their declared order.
    let steps: IngressSteps
    let probes: HealthProbes
    /// Runs admitted batches: the send budget, the lanes, the deadlines, the drain's window.
    let batches: BatchRunner
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
        self.deadTokens = deadTokens
        let idempotency = IdempotencyGate(store: idempotency, onReplay: onReplay, logger: logger)
        self.idempotency = idempotency
        self.tracer = tracer
        self.logger = logger
        steps = IngressSteps(
            observer: observer, tracer: tracer, waitUntilRecorded: { [service] in await service.waitUntilRecorded() },
            maximumConcurrentRequests: configuration.maximumConcurrentRequests, keyring: keyring, limiter: RateLimiter())
        let drain = steps.drain
        probes = HealthProbes { drain.isDraining ? "draining" : readiness() }
        batches = BatchRunner(configuration: configuration, service: service, idempotency: idempotency, drain: drain)
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
    public var notReadyReason: String? { probes.notReadyReason() }

    /// Requests being handled now.
    public var requestsInFlight: Int { steps.concurrency.inFlight }

    /// The per-key token buckets (the rate-limit step charges one per request, a batch the rest of its sends).
    var limiter: RateLimiter { steps.limiter }

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

    /// Parses a JSON body; the error names the line and column.
    ///
    /// `checksContentType: false` is for `/3/device`, where APNs reads the body
    /// as JSON whatever `content-type` says (curl's `-d` sends a form type), and
    /// a script written for Apple must work unchanged.
    func body(_ request: HTTPRequest, checksContentType: Bool = true) throws(IngressError) -> JSONValue {
        try Self.parseBody(request, checksContentType: checksContentType)
    }

    /// ``body(_:checksContentType:)`` for a controller that holds no `Ingress`.
    static func parseBody(_ request: HTTPRequest, checksContentType: Bool = true) throws(IngressError) -> JSONValue {
        guard !request.body.isEmpty else { throw .invalid("body", "is empty; send a JSON object") }
        if checksContentType, let type = request.header("content-type"), !Self.isJSONMediaType(type) {
            throw IngressError(status: 415, type: .unsupportedMediaType, message: "content-type must be application/json, not \(type)", field: "content-type")
        }
        do {
            return try JSONParser.parse(request.body)
        } catch {
            throw .invalid("body", "\(error)")
        }
    }

    /// Whether a `content-type` is `application/json` in any case, alone or
    /// followed by parameters (`; charset=utf-8`, blanks allowed before the
    /// `;`): `application/jsonfoo` or `application/json-seq` is another type.
    /// Compared byte by byte, without a lowercased copy per request (no other
    /// character lowercases to one of these ASCII letters).
    static func isJSONMediaType(_ type: String) -> Bool {
        let expected = "application/json".utf8
        let bytes = type.utf8
        guard bytes.count >= expected.count else { return false }
        guard zip(bytes, expected).allSatisfy({ byte, wanted in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 == wanted : byte == wanted
        }) else { return false }
        for byte in bytes.dropFirst(expected.count) {
            if byte == UInt8(ascii: ";") { return true }
            guard byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") else { return false }
        }
        return true
    }

    /// Checks that the key may act for `app` and that the relay serves it.
    ///
    /// An app the key may not name is refused alike whether it exists or
    /// not (403, the same message), so a key cannot learn other tenants' app
    /// names; only an app the key itself names (an admin key, or a scope
    /// listing an app the relay does not serve) gets 404.
    func authorize(_ key: APIKey, app: String, field: String = "app") throws(IngressError) {
        try Self.authorize(key, app: app, field: field, service: service)
    }

    /// ``authorize(_:app:field:)`` for a controller that holds no `Ingress`.
    static func authorize(_ key: APIKey, app: String, field: String = "app", service: RelayService) throws(IngressError) {
        try FieldLimits.check(app, FieldLimits.app, field: field)
        guard key.allows(app: app) else {
            throw IngressError(status: 403, type: .forbidden, message: "API key \(key.name) may not send for app \(app)", field: field)
        }
        guard service.serves(app: app) else {
            throw IngressError(status: 404, type: .notFound, message: "\(field): no app named \(app) on this relay", field: field)
        }
    }
}
