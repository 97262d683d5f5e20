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

    init(router: Router, configuration: HTTPServer.Configuration) {
        self.router = router
        self.configuration = configuration
        deadlines = RequestDeadlines(
            requestTimeoutSeconds: configuration.requestTimeoutSeconds,
            idleTimeoutSeconds: configuration.connectionTimeoutSeconds)
    }

    /// Routes `request` and runs its handler (on Swift's pool: this is the
    /// only step of a request that is not libmicrohttpd's bookkeeping).
    func respond(to request: HTTPRequest) async -> HTTPResponse {
        await router.respond(to: request, errors: configuration.errorRenderer)
    }

    /// The server's own refusal, in the configured error envelope and
    /// closing the connection (after a framing error nothing else on it can
    /// be trusted).
    func refusal(_ status: Int, _ type: String, _ message: String, field: String? = nil) -> HTTPResponse {
        var response = configuration.errorRenderer(status, type, message, field)
        response.headers.append(HTTPHeader("connection", "close"))
        return response
    }
}
