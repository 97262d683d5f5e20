import RelayBasics
import Synchronization

/// State shared by libmicrohttpd's callbacks for one server.
final class MHDServerCore: Sendable {
    let router: Router
    let configuration: HTTPServer.Configuration
    let inFlight = Atomic<Int>(0)
    /// Requests whose connection is suspended while their handler runs: a
    /// stop past the drain timeout must resume them first, since
    /// libmicrohttpd aborts the process when stopped with suspended connections.
    let suspended = Mutex<[ObjectIdentifier: PendingExchange]>([:])
    /// Set under the `suspended` lock when the server is about to stop: a
    /// request arriving after it (on a keep-alive connection) is answered at
    /// once instead of suspended, since libmicrohttpd aborts the process when
    /// stopped with a suspended connection.
    let intakeClosed = Atomic<Bool>(false)

    /// Closes the intake; from now on no connection is suspended.
    func closeIntake() {
        suspended.withLock { _ in intakeClosed.store(true, ordering: .relaxed) }
    }
    let deadlines: RequestDeadlines
    /// Set when libmicrohttpd stops accepting at the open-file limit: the
    /// next answer once a descriptor is free closes its connection (``queue``).
    let acceptSuspension: MHDAcceptSuspension
    /// The tasks that run the handlers, reused from one request to the next.
    let workers: HandlerWorkers<HandlerJob>

    /// A request handed to a handler task, with the exchange its answer resumes.
    struct HandlerJob: Sendable {
        let request: HTTPRequest
        let exchange: PendingExchange
    }

    init(router: Router, configuration: HTTPServer.Configuration) {
        self.router = router
        self.configuration = configuration
        let errors = configuration.errorRenderer
        // As many as 8 client connections' handlers keep their tasks, and 64
        // cover far more; past that a burst's extra workers end when done.
        workers = HandlerWorkers(maximumWaiting: 64) { job in
            let response = await router.respond(to: job.request, errors: errors)
            // In flight until libmicrohttpd reports the response written (see
            // mhdRequestCompleted): a drain that stopped the daemon as soon as the
            // handler returned would cut off answers still in the socket buffer.
            job.exchange.resume(with: response)
        }
        let acceptSuspension = MHDAcceptSuspension()
        self.acceptSuspension = acceptSuspension
        deadlines = RequestDeadlines(
            requestTimeoutSeconds: configuration.requestTimeoutSeconds,
            idleTimeoutSeconds: configuration.connectionTimeoutSeconds,
            connectionLimit: configuration.connectionLimit, acceptSuspension: acceptSuspension)
    }


    /// The server's own refusal, in the configured error envelope and
    /// closing the connection (after a framing error nothing else on it can
    /// be trusted).
    func refusal(_ status: Int, _ type: HTTPRefusalType, _ message: String, field: String? = nil) -> HTTPResponse {
        var response = configuration.errorRenderer(status, type, message, field)
        response.headers.append(HTTPHeader("connection", "close"))
        return response
    }
}
