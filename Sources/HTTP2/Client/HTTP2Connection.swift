public import RelayBasics
import Synchronization

/// One TLS HTTP/2 connection to an origin.
///
/// A thread of its own connects and handshakes (ALPN `h2` required); then
/// an event-loop thread runs nghttp2 over poll() on the socket and an
/// eventfd: the connection's own, or one its pool's connections share
/// (``HTTP2Pool/Configuration/sharesOneThread``). Callers never block:
/// ``send(_:)`` queues the request, wakes the loop if it sleeps, and
/// suspends until the loop resumes it with the answer or a typed error.
public final class HTTP2Connection: Sendable {
    /// Settings of one connection.
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        public var tls = TLSClientConfiguration()
        /// Our cap on concurrent streams; the effective limit is
        /// min(peer's SETTINGS_MAX_CONCURRENT_STREAMS, this), re-read on
        /// every turn of the loop, so a peer that lowers its limit
        /// mid-connection is honoured for every stream opened after.
        ///
        /// 1000, not the 900 it was: the peer's SETTINGS are the authority
        /// (APNs has been seen advertising 500, 1000 and 1500, and dropping
        /// to 1 after a rejected push), and a margin below them bought
        /// nothing: a stream the server refuses because its lower limit had
        /// not reached us yet comes back REFUSED_STREAM and is sent again
        /// without spending retry budget. Our cap only bounds the streams
        /// (and their buffers) one connection holds.
        public var maxConcurrentStreams = 1000
        /// Requests waiting for a stream slot; beyond it `send` fails at once.
        public var queueCapacity = 10_000
        public var connectTimeout = 10.0
        /// Looks the host up for each connect (``HostLookup/start(host:port:)``);
        /// a test plays a resolver that does not answer with it.
        public var lookUp: @Sendable (_ host: String, _ port: Int) -> HostLookup = { HostLookup.start(host: $0, port: $1) }
        /// Send a PING after this many seconds without traffic…
        public var pingInterval = 30.0
        /// …and give the connection up if the ACK takes longer than this.
        public var pingTimeout = 10.0
        /// Close after this many seconds with no streams.
        public var idleTimeout = 60.0
        /// The largest response body one stream may bring, and the most
        /// header fields its response may carry. Past either the stream is
        /// reset (CANCEL) and its request fails with a `.proto` error, so a
        /// broken or hostile peer cannot grow the relay's memory through
        /// one answer. APNs answers with at most a small JSON error; the
        /// channel list of an app is the largest answer it documents.
        public var maximumResponseBodyBytes = 1 << 20
        public var maximumResponseHeaders = 100

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `host:port` as logs and metrics name it.
        public var origin: String { "\(host):\(port)" }
    }

    /// Where the connection is in its life.
    public enum State: Int, Sendable {
        case connecting, ready, goingAway, closed
    }

    let core: ConnectionCore
    /// The core's part that callers touch, kept here too: one load per call, not two.
    private let handOff: ConnectionHandOff

    /// Starts connecting at once on a new thread.
    public convenience init(configuration: Configuration, observer: HTTP2EventObserver? = nil) {
        self.init(configuration: configuration, observer: observer, loop: ConnectionLoop())
    }

    /// Starts connecting at once on a new thread (unless `startingNow` is
    /// false: then ``start()`` does); once up, the connection is served by
    /// `loop`, with the other connections that share it.
    init(
        configuration: Configuration, observer: HTTP2EventObserver?, loop: ConnectionLoop, tuning: Tuning = Tuning(),
        startingNow: Bool = true
    ) {
        core = ConnectionCore(configuration: configuration, observer: observer, loop: loop, tuning: tuning)
        handOff = core.handOff
        if startingNow { core.start() }
    }

    /// Starts connecting on a new thread. Out of threads, the connection
    /// fails here, on the caller's thread, like a refused connect: its
    /// observer hears `.refused`, so the caller must not hold a lock the
    /// observer takes (``HTTP2Pool`` makes connections under its lock and
    /// starts them after it).
    func start() { core.start() }

    /// Knobs for tests, kept out of the public `Configuration` (whose
    /// layout other modules compile against).
    struct Tuning: Sendable {
        /// The longest the thread sleeps in poll() without a wake-up or a
        /// deadline: a safety net, so a deadline missed by the loop's
        /// bookkeeping is acted on at most this late. Tests raise it to show
        /// that no wake-up depends on it.
        var longestSleep = 1.0
        /// Runs on the connection thread just before it decides whether to
        /// sleep: tests widen the window in which a hand-over races the
        /// thread going to sleep.
        var beforeSleep: (@Sendable () -> Void)?
    }

    /// Sends a request and waits for the complete response.
    ///
    /// Cancelling the calling task resets the stream (RST_STREAM CANCEL) and
    /// throws `.cancelled`. A request the server never processed (GOAWAY,
    /// REFUSED_STREAM, the connection failing before it was sent) throws
    /// `.unprocessed`, which is always safe to send again.
    public func send(_ request: HTTP2Request) async throws(HTTP2Error) -> HTTP2Response {
        let token = handOff.nextToken()
        let deadline = MonotonicClock.now() + UInt64(max(0.001, request.timeout) * 1e9)
        let result = await withTaskCancellationHandler {
            // Unchecked: `PendingRequest` documents why it is resumed exactly once.
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Result<HTTP2Response, HTTP2Error>, Never>) in
                handOff.enqueue(PendingRequest(token: token, request: request, deadline: deadline, continuation: continuation))
            }
        } onCancel: {
            handOff.cancel(token: token)
        }
        return try result.get()
    }

    /// The connection's state now.
    public var state: State { handOff.state }
    /// Requests queued or in flight: what least-loaded dispatch compares.
    public var load: Int { handOff.load.load(ordering: .relaxed) }

    /// Stops taking requests, lets in-flight ones finish for up to
    /// `drainTimeout` seconds, then closes (failing what is left).
    public func close(drainTimeout: Double = 5) async {
        await handOff.close(drainTimeout: drainTimeout)
    }
}

/// A request waiting for its answer.
///
/// A class: the request moves from the hand-over queue to the waiting FIFO
/// to the stream table, and a struct of its size (the request's strings and
/// arrays, the continuation) paid a retain and a release per field at each move.
///
/// The continuation is unchecked, yet resumed exactly once by construction:
/// the one `PendingRequest` for a send lives in exactly one place at a time
/// (refused by `ConnectionHandOff.enqueue`, or in its `Shared.incoming`,
/// then in the `StreamTable`: waiting, then on a stream), and every path that
/// calls `finish` takes it out of that place first, on the one thread that
/// owns the place (`enqueue`'s caller before handing over, the connection
/// thread after). A cancellation or deadline
/// that comes later finds nothing under its token and does nothing.
final class PendingRequest: @unchecked Sendable {
    let token: UInt64
    let request: HTTP2Request
    /// Monotonic nanoseconds by which the whole answer must be in, queueing included.
    let deadline: UInt64
    private let continuation: UnsafeContinuation<Result<HTTP2Response, HTTP2Error>, Never>
    #if DEBUG
        private var finished = false
    #endif

    init(token: UInt64, request: HTTP2Request, deadline: UInt64, continuation: UnsafeContinuation<Result<HTTP2Response, HTTP2Error>, Never>) {
        self.token = token
        self.request = request
        self.deadline = deadline
        self.continuation = continuation
    }

    func finish(_ result: Result<HTTP2Response, HTTP2Error>) {
        #if DEBUG
            precondition(!finished, "request \(token) finished twice")
            finished = true
        #endif
        continuation.resume(returning: result)
    }
}
