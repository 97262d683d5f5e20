import Synchronization
import RelayBasics

/// What callers' threads share with a client connection's thread: the
/// hand-over queue (requests, cancellations, the close request), the
/// connection's state, its load and its stream limit as `enqueue` reads
/// them, and the one rule for waking the thread.
///
/// The only part of a connection that any thread may touch; every field is
/// behind `shared`'s lock or atomic. The connection thread takes what was
/// handed over (`take(swapping:)`) and answers each request through
/// `complete`, so the load it counts stays right.
final class ConnectionHandOff: Sendable {
    struct Shared {
        /// The eventfd that wakes whoever serves this connection: its own
        /// thread while it sets up, then its `ConnectionLoop` (`join`).
        var wake: WakeSignal
        var incoming: [PendingRequest] = []
        var cancelled: [UInt64] = []
        var closeRequested = false
        var closeDeadline: UInt64 = 0
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
        var exited = false
        /// The thread is asleep in poll() (or about to be) and saw nothing
        /// handed over: the next hand-over must signal the eventfd. Like
        /// io_uring's SQ_NEED_WAKEUP: while the thread is awake nobody writes
        /// the eventfd, since it looks at `incoming` again before it sleeps
        /// (`prepareToSleep`). Under load the thread is mostly awake, so most
        /// sends cost no write(2) and the thread no extra turn through poll().
        ///
        /// No wake-up is lost: the thread sets the flag and the sender
        /// appends and reads it under this one lock. If the sender goes
        /// first, the thread sees its request and does not sleep; if the
        /// thread goes first, the sender sees the flag and signals, and the
        /// eventfd stays readable until the thread's poll() drains it.
        var sleeping = false
        /// Whether a hand-over just made must signal the eventfd. The first
        /// one after the thread fell asleep does (and clears the flag): one
        /// signal wakes the thread for everything handed over until it runs.
        mutating func needsSignal() -> Bool {
            defer { sleeping = false }
            return sleeping
        }

        /// Why the connection never came up (connect, TLS, ALPN), once the
        /// thread has exited: later requests get this, not a resendable error.
        var setupFailure: HTTP2Error?
    }

    /// What the connection thread swaps in for `Shared.incoming` and
    /// `Shared.cancelled` (`take(swapping:)`): its own spare arrays, empty
    /// between turns, so taking a hand-over copies nothing and allocates no
    /// fresh buffer.
    struct Taken {
        var incoming: [PendingRequest] = []
        var cancelled: [UInt64] = []
    }

    /// `host:port`, for the refusals' messages.
    let origin: String
    private let queueCapacity: Int
    let shared: Mutex<Shared>
    /// Requests queued or in flight: what least-loaded dispatch compares.
    let load = Atomic<Int>(0)
    private let stateValue = Atomic<Int>(HTTP2Connection.State.connecting.rawValue)
    /// Streams allowed at once; our cap until the peer's SETTINGS arrive,
    /// then min(peer, cap). Written by the connection thread, read by `enqueue`.
    let streamLimit: Atomic<Int>
    private let tokens = Atomic<UInt64>(0)
    /// Wakes the connection's own thread while it connects and handshakes.
    let setupWake: WakeSignal

    init(configuration: HTTP2Connection.Configuration) {
        origin = configuration.origin
        queueCapacity = configuration.queueCapacity
        let setupWake = WakeSignal()
        self.setupWake = setupWake
        shared = Mutex(Shared(wake: setupWake))
        streamLimit = Atomic(max(1, configuration.maxConcurrentStreams))
    }

    var state: HTTP2Connection.State { HTTP2Connection.State(rawValue: stateValue.load(ordering: .acquiring))! }

    func setState(_ state: HTTP2Connection.State) { stateValue.store(state.rawValue, ordering: .releasing) }

    func nextToken() -> UInt64 { tokens.wrappingAdd(1, ordering: .relaxed).newValue }

    /// Hands a request to the thread, or refuses it at once.
    func enqueue(_ pending: PendingRequest) {
        let (refusal, signal) = shared.withLock { shared -> (HTTP2Error?, WakeSignal?) in
            // Checked under the lock: a cancellation that lands after this
            // check queues its token after the request, and the thread takes
            // both in one snapshot, request first, so it is never lost.
            if Task.isCancelled { return (HTTP2Error(.cancelled, "cancelled by the caller before sending"), nil) }
            if let failure = shared.setupFailure { return (failure, nil) }
            if shared.exited || shared.closeRequested { return (HTTP2Error(.notSent, "connection to \(origin) is closing"), nil) }
            // Load is in flight plus waiting, and at most `streamLimit` are in flight.
            if load.load(ordering: .relaxed) >= queueCapacity + streamLimit.load(ordering: .relaxed) {
                return (HTTP2Error(.queueFull, "more than \(queueCapacity) requests waiting for \(origin)"), nil)
            }
            if state == .goingAway || state == .closed {
                return (HTTP2Error(.notSent, "connection to \(origin) is going away"), nil)
            }
            shared.incoming.append(pending)
            load.add(1, ordering: .relaxed)
            return (nil, shared.needsSignal() ? shared.wake : nil)
        }
        if let refusal { pending.finish(.failure(refusal)) } else { signal?.signal() }
    }

    func cancel(token: UInt64) {
        let signal = shared.withLock { shared in
            shared.cancelled.append(token)
            return shared.needsSignal() ? shared.wake : nil
        }
        signal?.signal()
    }

    func close(drainTimeout: Double) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let wake = shared.withLock { shared -> WakeSignal? in
                if shared.exited { return nil }
                if !shared.closeRequested {
                    shared.closeRequested = true
                    shared.closeDeadline = MonotonicClock.now() + UInt64(drainTimeout * 1e9)
                }
                shared.closeWaiters.append(continuation)
                return shared.wake
            }
            if let wake { wake.signal() } else { continuation.resume() }
        }
    }

    // MARK: The connection thread's side

    /// Swaps what was handed over since the last call with `taken`'s empty
    /// arrays: requests first, then cancellations (see `enqueue`), with the
    /// close request as it stands.
    func take(swapping taken: inout Taken) -> (closeRequested: Bool, closeDeadline: UInt64) {
        shared.withLock { shared in
            swap(&shared.incoming, &taken.incoming)
            swap(&shared.cancelled, &taken.cancelled)
            return (shared.closeRequested, shared.closeDeadline)
        }
    }

    /// Answers a request taken from the hand-over, once.
    func complete(_ pending: PendingRequest, _ result: Result<HTTP2Response, HTTP2Error>) {
        load.subtract(1, ordering: .relaxed)
        pending.finish(result)
    }

    /// Called by the thread just before poll(): false when something was
    /// handed over since `take(swapping:)` (the thread must not sleep, but
    /// turn again at once); true after marking the thread asleep, so that
    /// the next hand-over signals (see `Shared.sleeping`).
    func prepareToSleep() -> Bool {
        shared.withLock { shared in
            guard shared.incoming.isEmpty, shared.cancelled.isEmpty else { return false }
            shared.sleeping = true
            return true
        }
    }

    /// Called by the thread when poll() returns: hand-overs from now on need no signal.
    func awoke() {
        shared.withLock { $0.sleeping = false }
    }

    /// From now on hand-overs wake `wake` (the loop's), not the set-up thread.
    func moveWakeUps(to wake: WakeSignal) {
        shared.withLock { $0.wake = wake }
    }

    /// The connection is closed: with `setupFailure` (why it never came up)
    /// set in the same step, so that `enqueue` sees both or neither.
    func markClosed(setupFailure: HTTP2Error?) {
        shared.withLock { shared in
            if let setupFailure { shared.setupFailure = setupFailure }
            setState(.closed)
        }
    }

    /// The thread is gone: takes what was handed over and never taken, and
    /// who waits for the close; `enqueue` refuses from now on.
    func exit() -> (incoming: [PendingRequest], closeWaiters: [CheckedContinuation<Void, Never>]) {
        shared.withLock { shared in
            shared.exited = true
            defer {
                shared.incoming.removeAll()
                shared.closeWaiters.removeAll()
            }
            return (shared.incoming, shared.closeWaiters)
        }
    }
}
