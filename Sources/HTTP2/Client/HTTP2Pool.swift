import Synchronization

/// A pool of HTTP/2 connections to one origin.
///
/// Up to `size` connections are opened lazily, the least loaded one takes
/// each request, and a connection that closes (idle, GOAWAY, failure) is
/// replaced on demand, after a backoff with jitter when opening keeps
/// failing. A request the server never processed (GOAWAY above
/// last-stream-id, REFUSED_STREAM) is sent again on another connection
/// without the caller seeing it: that is not a failed attempt.
///
/// The pool is the only layer that resends such requests, up to
/// `maximumUnprocessedResends` times within the request's timeout: only it
/// knows which connection went away and can pick a fresh one, and a request
/// the server never processed is no APNs attempt (no status, no reason, no
/// retry budget). The relay's send loop takes the `.unprocessed` error it
/// gets after that as final, so one request is transmitted at most
/// 1 + `maximumUnprocessedResends` times per attempt (docs/architecture.md).
/// What counts is a request sent to a server that processed nothing on that
/// connection: the pathological peer the bound is for. Two kinds of resend
/// do not count, since the server is making progress and a burst of
/// requests through a connection rotation (GOAWAY every N streams) must all
/// get through: a request its connection refused before writing it
/// (`.notSent`: the connection began going away while the request waited
/// for a stream), and a request refused by a connection on which the server
/// processed other streams (`serverMadeProgress`). Those are bounded by the
/// timeout and by `maximumUncountedResends`.
public final class HTTP2Pool: Sendable {
    public struct Configuration: Sendable {
        public var connection: HTTP2Connection.Configuration
        /// Connections kept to the origin.
        public var size = 2
        /// How many times one request may be resent after coming back
        /// unprocessed: the one bound on GOAWAY resends in the relay.
        public var maximumUnprocessedResends = 5
        /// A safety cap on the resends that do not count against
        /// `maximumUnprocessedResends` (see the type's comment).
        public var maximumUncountedResends = 64
        /// Backoff between failed connection attempts: doubling from the
        /// minimum to the maximum, with up to 20% jitter.
        public var reconnectMinimumDelay = 0.05
        public var reconnectMaximumDelay = 5.0
        /// Serve all the connections from one event-loop thread (once each is
        /// set up) instead of a thread each. One thread polls every socket,
        /// so at moderate load it wakes less often per request and costs
        /// less CPU per request (the relay: about 6% per single send, 17%
        /// in batches); but all the connections' TLS and HTTP/2 work then
        /// runs on one core, which caps the pool's peak rate (about 90,000
        /// against 105,000 requests/s on the 2-core benchmark machine).
        public var sharesOneThread = false

        public init(connection: HTTP2Connection.Configuration) { self.connection = connection }
    }

    private struct State {
        var connections: [HTTP2Connection] = []
        var closed = false
        var consecutiveFailures = 0
        var nextAttempt: ContinuousClock.Instant?
        /// The thread that serves all the connections once they are up, when
        /// `sharesOneThread` (see `ConnectionLoop`); nil for a thread each,
        /// or until the first connection.
        var sharedLoop: ConnectionLoop?

        /// The shared loop a new connection joins. One made while the
        /// process had no descriptor for its eventfd (EMFILE) fails every
        /// connection's set-up, so it is replaced: it never served one.
        mutating func sharedLoopToJoin() -> ConnectionLoop {
            if let loop = sharedLoop, loop.wake.failure == nil { return loop }
            let loop = ConnectionLoop()
            sharedLoop = loop
            return loop
        }
    }

    public let configuration: Configuration
    private let observer: HTTP2EventObserver?
    private let state = Mutex(State())

    public init(configuration: Configuration, observer: HTTP2EventObserver? = nil) {
        self.configuration = configuration
        self.observer = observer
    }

    /// Sends on the least-loaded usable connection, resending transparently
    /// when the server did not process the request. The request's timeout
    /// covers its resends too, so a caller's deadline holds.
    public func send(_ request: HTTP2Request) async throws(HTTP2Error) -> HTTP2Response {
        let clock = ContinuousClock()
        let deadline = clock.now + .nanoseconds(Int64(max(0, request.timeout) * 1e9))
        var next = request
        var resends = 0
        var uncounted = 0
        while true {
            let connection = try await pick()
            do {
                return try await connection.send(next)
            } catch where error.code == .unprocessed || error.code == .notSent {
                let counted = error.code == .unprocessed && !error.serverMadeProgress
                let left = deadline - clock.now
                let withinBound = counted ? resends < configuration.maximumUnprocessedResends : uncounted < configuration.maximumUncountedResends
                guard left > .zero, withinBound else {
                    throw HTTP2Error(.unprocessed, "\(error.message) (sent \(resends + (counted ? 1 : 0)) time(s), never processed)")
                }
                if counted { resends += 1 } else { uncounted += 1 }
                next.timeout = left.seconds
            }
        }
    }

    /// Connections by state (connecting, ready, going_away), for metrics.
    public var connectionStates: [String: Int] {
        state.withLock { state in
            var counts: [String: Int] = [:]
            for connection in state.connections {
                switch connection.state {
                case .connecting: counts["connecting", default: 0] += 1
                case .ready: counts["ready", default: 0] += 1
                case .goingAway: counts["going_away", default: 0] += 1
                case .closed: break
                }
            }
            return counts
        }
    }

    /// Requests queued or in flight across the pool's connections.
    public var load: Int { state.withLock { $0.connections.reduce(0) { $0 + $1.load } } }

    /// The connections now, for tests that watch one of them.
    var connections: [HTTP2Connection] { state.withLock { $0.connections } }

    /// Open connections (any state but closed).
    public var openConnections: Int {
        state.withLock { $0.connections.filter { $0.state != .closed }.count }
    }

    /// Stops intake; each connection drains for up to `drainTimeout` seconds.
    public func close(drainTimeout: Double = 5) async {
        let connections = state.withLock { state -> [HTTP2Connection] in
            state.closed = true
            defer { state.connections.removeAll() }
            return state.connections
        }
        await withTaskGroup(of: Void.self) { group in
            for connection in connections { group.addTask { await connection.close(drainTimeout: drainTimeout) } }
        }
    }

    private func pick() async throws(HTTP2Error) -> HTTP2Connection {
        while true {
            var made: HTTP2Connection?
            let decision = state.withLock { state -> Result<HTTP2Connection, HTTP2Error>? in
                if state.closed { return .failure(HTTP2Error(.closed, "pool for \(configuration.connection.origin) is closed")) }
                if state.connections.contains(where: { $0.state == .closed }) { state.connections.removeAll { $0.state == .closed } }
                // One pass, no array per send: the first idle usable
                // connection, else the least loaded one, and how many are usable.
                var usableCount = 0
                var leastLoaded: (connection: HTTP2Connection, load: Int)?
                for connection in state.connections {
                    let connectionState = connection.state
                    guard connectionState == .ready || connectionState == .connecting else { continue }
                    usableCount += 1
                    let load = connection.load
                    // Lazy: an idle connection takes the request before a new one is opened.
                    if load == 0 { return .success(connection) }
                    if leastLoaded.map({ load < $0.load }) ?? true { leastLoaded = (connection, load) }
                }
                if usableCount < configuration.size {
                    if let next = state.nextAttempt, ContinuousClock.now < next {
                        // Backing off: use what is there, or wait.
                        return leastLoaded.map { .success($0.connection) }
                    }
                    // Started after the lock: a start that fails reports to
                    // the observer, which takes it.
                    let connection = HTTP2Connection(
                        configuration: configuration.connection, observer: connectionObserver,
                        loop: configuration.sharesOneThread ? state.sharedLoopToJoin() : ConnectionLoop(), startingNow: false)
                    if !state.connections.isEmpty || state.consecutiveFailures > 0 { observer?(configuration.connection.origin, .reconnect) }
                    state.connections.append(connection)
                    made = connection
                    return .success(connection)
                }
                return leastLoaded.map { .success($0.connection) }
            }
            made?.start()
            switch decision {
            case .success(let connection): return connection
            case .failure(let error): throw error
            case nil:
                let wait = state.withLock { $0.nextAttempt.map { $0 - ContinuousClock.now } } ?? .milliseconds(10)
                try? await Task.sleep(for: max(wait, .milliseconds(1)))
                if Task.isCancelled { throw HTTP2Error(.cancelled, "cancelled while waiting for a connection") }
            }
        }
    }

    /// Counts set-up failures from the connections' own events: once per
    /// connection, however many requests were waiting on it.
    private var connectionObserver: HTTP2EventObserver {
        { [weak self] origin, event in
            guard let self else { return }
            // Forwarded first: an observer's clock then never reads later
            // than the moment the backoff starts counting.
            observer?(origin, event)
            switch event {
            case .opened: state.withLock { $0.consecutiveFailures = 0 }
            case .refused: noteConnectFailure()
            default: break
            }
        }
    }

    /// Connection set-ups that failed in a row (drives the reconnect backoff).
    var consecutiveConnectFailures: Int { state.withLock { $0.consecutiveFailures } }

    private func noteConnectFailure() {
        state.withLock { state in
            state.consecutiveFailures += 1
            let exponent = Double(min(state.consecutiveFailures - 1, 20))
            let base = min(configuration.reconnectMinimumDelay * pow2(exponent), configuration.reconnectMaximumDelay)
            let delay = base * Double.random(in: 0.8...1.2)
            state.nextAttempt = ContinuousClock.now + .milliseconds(Int(delay * 1000))
        }
    }

    private func pow2(_ exponent: Double) -> Double {
        var value = 1.0
        for _ in 0..<Int(exponent) { value *= 2 }
        return value
    }
}
