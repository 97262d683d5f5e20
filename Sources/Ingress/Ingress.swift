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
/// Every request is authenticated by API key, limited (concurrency, per-key
/// rate), traced (an incoming `traceparent` becomes the parent; the answer
/// carries the relay's own) and counted by route and status.
public final class Ingress: Sendable {
    /// Limits of the API.
    public struct Configuration: Sendable {
        /// Items in one `POST /v1/send/batch`.
        public var maximumBatchItems = 1000
        /// Sends in one batch after `tokens` fan-out.
        public var maximumBatchSends = 10_000
        /// Requests handled at once; beyond it: 503 with Retry-After.
        public var maximumConcurrentRequests = 1024
        /// Sends of one batch in flight at once.
        public var batchConcurrency = 64
        /// Sends admitted and not yet finished across every request (a batch
        /// counts all of its sends from admission); beyond it: 503 Overloaded
        /// with Retry-After, and a batch that does not fit is refused whole.
        public var maximumSendsInFlight = 100_000
        /// Sends of all batches running at once (each batch at most
        /// ``batchConcurrency``); kept below the APNs connections' stream
        /// limit so single sends never queue behind batches.
        public var maximumBatchSendsRunning = 512
        /// Seconds a batch may run: items not started by then are answered
        /// `NotSent`, items still running are cancelled. Below the client
        /// timeout docs/api.md recommends (35 s).
        public var batchDeadlineSeconds = 30.0

        public init() {}
    }

    /// Called once per answered request (metrics): the route pattern, the status, seconds taken.
    public typealias RequestObserver = @Sendable (_ route: String, _ status: Int, _ seconds: Double) -> Void

    let configuration: Configuration
    let service: RelayService
    let keyring: APIKeyring
    let deadTokens: (any DeadTokenSource)?
    let tracer: any Tracer
    let logger: Logger
    let readiness: @Sendable () -> String?
    let observer: RequestObserver?
    let limiter = RateLimiter()
    let inFlight = Atomic<Int>(0)
    let draining = Atomic<Bool>(false)
    /// While draining, batches start sends until then (see ``beginDraining(batchesStartFor:)``).
    let batchStartsUntil = Mutex<ContinuousClock.Instant?>(nil)
    let sendBudget: SendBudget
    let batchLanes: BatchLanes
    /// Batch sends answered NotSent since start-up, by reason.
    let notSent = Mutex<[String: Int]>([:])

    public init(
        configuration: Configuration = Configuration(), service: RelayService, keyring: APIKeyring,
        deadTokens: (any DeadTokenSource)?, tracer: any Tracer, logger: Logger,
        readiness: @escaping @Sendable () -> String? = { nil }, observer: RequestObserver? = nil
    ) {
        self.configuration = configuration
        self.service = service
        self.keyring = keyring
        self.deadTokens = deadTokens
        self.tracer = tracer
        self.logger = logger
        self.readiness = readiness
        self.observer = observer
        sendBudget = SendBudget(limit: configuration.maximumSendsInFlight)
        batchLanes = BatchLanes(capacity: configuration.maximumBatchSendsRunning)
    }

    /// Stops taking new work: every later request gets 503 Draining, while
    /// the ones already running finish. Running batches go on starting their
    /// sends for `batchesStartFor` seconds, then answer the rest `NotSent`
    /// (reason `Draining`), so every send of theirs ends with a result before
    /// the drain has to cut anything off.
    public func beginDraining(batchesStartFor seconds: Double = 0) {
        batchStartsUntil.withLock { $0 = ContinuousClock.now + .milliseconds(Int(max(0, seconds) * 1000)) }
        draining.store(true, ordering: .releasing)
    }

    public var isDraining: Bool { draining.load(ordering: .acquiring) }

    /// Requests being handled now.
    public var requestsInFlight: Int { inFlight.load(ordering: .relaxed) }

    /// Sends admitted and not yet finished (a batch's unstarted sends included).
    public var sendsAdmitted: Int { sendBudget.inUse }

    /// Batch sends running now.
    public var batchSendsRunning: Int { batchLanes.inUse }

    /// Batch sends never started (answered `NotSent`) since start-up, by reason.
    public var batchSendsNotSent: [String: Int] { notSent.withLock { $0 } }

    /// Adds every route to `router`.
    public func install(on router: inout Router) {
        router.add("POST", "/v1/send", guarded("/v1/send", send))
        router.add("POST", "/v1/send/batch", guarded("/v1/send/batch", batch))
        router.add("POST", "/v1/describe", guarded("/v1/describe", describe))
        router.add("POST", "/v1/channels", guarded("/v1/channels", createChannel))
        router.add("GET", "/v1/channels", guarded("/v1/channels", listChannels))
        router.add("DELETE", "/v1/channels/{channelId...}", guarded("/v1/channels/{channelId}", deleteChannel))
        router.add("GET", "/v1/dead-tokens", guarded("/v1/dead-tokens", listDeadTokens))
        router.add("POST", "/3/device/{token}", guarded("/3/device/{token}", deviceCompatible))
        router.add("GET", "/v1/admin/retry", guarded("/v1/admin/retry", retryState))
        router.add("PUT", "/v1/admin/retry", guarded("/v1/admin/retry", setRetryState))
        let readiness = readiness
        let observer = observer
        router.add("GET", "/healthz") { _ in
            observer?("/healthz", 200, 0)
            return .text(200, "ok\n")
        }
        router.add("GET", "/readyz") { [self] _ in
            let reason = isDraining ? "draining" : readiness()
            observer?("/readyz", reason == nil ? 200 : 503, 0)
            if let reason { return .text(503, "not ready: \(reason)\n") }
            return .text(200, "ready\n")
        }
    }

    /// What a route handler gets: the request, the caller's key, and the span to parent sends on.
    struct Call {
        var request: HTTPRequest
        var key: APIKey
        var span: any Span
        var context: SendContext { SendContext(caller: key.name, instrumentation: span.context) }
    }

    typealias Route = @Sendable (Call) async throws(IngressError) -> HTTPResponse

    /// Wraps a route: draining and concurrency checks, authentication, the
    /// per-key rate limit, the request span, error bodies, and metrics.
    private func guarded(_ route: String, _ handler: @escaping Route) -> HTTPHandler {
        { [self] request in
            let started = ContinuousClock.now
            var parent = ServiceContext.topLevel
            tracer.extract(request.headers, into: &parent, using: HTTPHeaderPropagation())
            let span = tracer.startSpan("ingress.request", context: parent, ofKind: .server)
            span.attributes["http.route"] = route
            span.attributes["http.request.method"] = request.method
            var response: HTTPResponse
            do throws(IngressError) {
                response = try await admit(route, request, span, handler)
            } catch {
                // The promise: an answered send has its row, whatever crashes next.
                if error.isRecordedRefusal { await service.waitUntilRecorded() }
                response = error.response
                if error.status >= 500 { span.setStatus(SpanStatus(code: .error, message: error.type)) }
            }
            span.attributes["http.response.status_code"] = response.status
            if let traceparent = tracer.traceParentHeader(for: span.context) { response.headers.append(HTTPHeader(TraceParent.headerName, traceparent)) }
            span.end()
            observer?(route, response.status, started.duration(to: .now).seconds)
            return response
        }
    }

    private func admit(_ route: String, _ request: HTTPRequest, _ span: any Span, _ handler: Route) async throws(IngressError) -> HTTPResponse {
        if isDraining {
            var error = IngressError(status: 503, type: "Draining", message: "this relay instance is shutting down; retry on another")
            error.retryAfter = 1
            throw error
        }
        let running = inFlight.wrappingAdd(1, ordering: .relaxed).newValue
        defer { inFlight.wrappingSubtract(1, ordering: .relaxed) }
        if running > configuration.maximumConcurrentRequests {
            var error = IngressError(status: 503, type: "Overloaded", message: "more than \(configuration.maximumConcurrentRequests) requests in progress")
            error.retryAfter = 1
            throw error
        }
        guard let key = keyring.authenticate(authorization: request.header("authorization")) else { throw IngressError.unauthorized }
        span.attributes["apns_relay.caller"] = key.name
        if let rate = key.ratePerSecond {
            let burst = key.burst ?? rate
            if let wait = limiter.acquire(key: key.name, ratePerSecond: rate, burst: burst) {
                var error = IngressError(status: 429, type: "RateLimited", message: "API key \(key.name) is over its \(rate) requests/s limit")
                error.retryAfter = wait
                throw error
            }
        }
        return try await handler(Call(request: request, key: key, span: span))
    }

    /// Parses a JSON body; the error names the line and column.
    ///
    /// `checksContentType: false` is for `/3/device`, where APNs reads the body
    /// as JSON whatever `content-type` says (curl's `-d` sends a form type), and
    /// a script written for Apple must work unchanged.
    func body(_ request: HTTPRequest, checksContentType: Bool = true) throws(IngressError) -> JSONValue {
        guard !request.body.isEmpty else { throw .invalid("body", "is empty; send a JSON object") }
        if checksContentType, let type = request.header("content-type"), !type.lowercased().hasPrefix("application/json") {
            throw IngressError(status: 415, type: "UnsupportedMediaType", message: "content-type must be application/json, not \(type)", field: "content-type")
        }
        do {
            return try JSONParser.parse(request.body)
        } catch {
            throw .invalid("body", "\(error)")
        }
    }

    /// Checks that the key may act for `app` and that the relay serves it.
    func authorize(_ key: APIKey, app: String, field: String = "app") throws(IngressError) {
        guard service.appNames.contains(app) else {
            throw IngressError(status: 404, type: "NotFound", message: "\(field): no app named \(app) on this relay", field: field)
        }
        guard key.allows(app: app) else {
            throw IngressError(status: 403, type: "Forbidden", message: "API key \(key.name) may not send for app \(app)", field: field)
        }
    }
}
