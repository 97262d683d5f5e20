import Foundation
import Synchronization
import RelayBasics

/// The connection's state: a part any thread may touch (under `shared`), and
/// a part only the connection thread touches (everything else).
final class ConnectionCore: @unchecked Sendable {
    // Thread discipline: `shared`, `load`, `stateValue` and `tokens` are
    // synchronized; every other stored property is read and written only on
    // the connection's own thread, started in `start()`.

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

    let configuration: HTTP2Connection.Configuration
    let tuning: HTTP2Connection.Tuning
    /// `:authority` for requests that name none: made once, not per request.
    let defaultAuthority: String
    let observer: HTTP2EventObserver?
    let shared: Mutex<Shared>
    let load = Atomic<Int>(0)
    let stateValue = Atomic<Int>(HTTP2Connection.State.connecting.rawValue)
    /// Streams allowed at once; our cap until the peer's SETTINGS arrive,
    /// then min(peer, cap). Written by the thread, read by `enqueue`.
    let streamLimit: Atomic<Int>
    private let tokens = Atomic<UInt64>(0)
    /// Wakes the thread while it connects and handshakes.
    let setupWake: WakeSignal
    /// Serves the connection once it is up (with the pool's other connections).
    let loop: ConnectionLoop

    // Thread-owned.
    var tls: TLSStream?
    var socket: Int32 = -1
    var session: NGHTTP2Session?
    var output: [UInt8] = []
    var outputOffset = 0
    /// Where TLS records are decrypted into, kept: a fresh 16 KiB buffer per read was a malloc and a memset each wake-up.
    var readBuffer = [UInt8](repeating: 0, count: 16_384)
    /// What `takeIncoming` swaps in for `Shared.incoming` and `Shared.cancelled`: empty between turns.
    var takenIncoming: [PendingRequest] = []
    var takenCancelled: [UInt64] = []
    var waiting: [PendingRequest] = []
    var waitingHead = 0
    var streams: [Int32: StreamState] = [:]
    /// No request in `streams` (or in `waiting`) has a deadline before
    /// this: lowered as requests come in, made exact again by the look
    /// through them once it passes, so that a turn does not go through
    /// every stream to find the earliest deadline.
    var streamDeadlineBound = UInt64.max
    var waitingDeadlineBound = UInt64.max
    var streamByToken: [UInt64: Int32] = [:]
    var goAwayLastStream: Int32?
    /// Streams the server answered on this connection (for ``unprocessed(_:)``).
    var answeredStreams = 0
    /// Streams wait for the server's SETTINGS so its concurrency limit is known.
    var peerSettingsReceived = false
    var lastActivity: UInt64 = 0
    var pingSentAt: UInt64?
    var idleSince: UInt64?
    /// The drain deadline while a close is under way, for `sleepBudget`.
    var pendingCloseDeadline: UInt64?

    struct StreamState {
        var pending: PendingRequest
        var deadline: UInt64
        var status: Int?
        var headers: [HTTPHeader] = []
        var body: [UInt8] = []
        var ended = false
        /// Why the response was refused as too large (the stream is reset).
        var oversized: String?
    }

    init(configuration: HTTP2Connection.Configuration, observer: HTTP2EventObserver?, loop: ConnectionLoop, tuning: HTTP2Connection.Tuning) {
        self.configuration = configuration
        self.tuning = tuning
        self.observer = observer
        self.loop = loop
        let setupWake = WakeSignal()
        self.setupWake = setupWake
        shared = Mutex(Shared(wake: setupWake))
        defaultAuthority = configuration.port == 443 ? configuration.host : configuration.origin
        streamLimit = Atomic(max(1, configuration.maxConcurrentStreams))
    }

    func start() {
        Socket.ignoreBrokenPipes
        let thread = Thread { [self] in run() }
        thread.name = "h2 \(configuration.origin)"
        thread.start()
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
            if shared.exited || shared.closeRequested { return (HTTP2Error(.notSent, "connection to \(configuration.origin) is closing"), nil) }
            // Load is in flight plus waiting, and at most `streamLimit` are in flight.
            if load.load(ordering: .relaxed) >= configuration.queueCapacity + streamLimit.load(ordering: .relaxed) {
                return (HTTP2Error(.queueFull, "more than \(configuration.queueCapacity) requests waiting for \(configuration.origin)"), nil)
            }
            if state == .goingAway || state == .closed {
                return (HTTP2Error(.notSent, "connection to \(configuration.origin) is going away"), nil)
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

    /// Called by the thread just before poll(): false when something was
    /// handed over since `takeIncoming` (the thread must not sleep, but turn
    /// again at once); true after marking the thread asleep, so that the next
    /// hand-over signals (see `Shared.sleeping`).
    func prepareToSleep() -> Bool {
        shared.withLock { shared in
            guard shared.incoming.isEmpty, shared.cancelled.isEmpty else { return false }
            shared.sleeping = true
            return true
        }
    }

    /// From now on hand-overs wake `wake` (the loop's), not the set-up thread.
    func moveWakeUps(to wake: WakeSignal) {
        shared.withLock { $0.wake = wake }
    }

    /// Called by the thread when poll() returns: hand-overs from now on need no signal.
    func awoke() {
        shared.withLock { $0.sleeping = false }
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

    func report(_ event: HTTP2ConnectionEvent) { observer?(configuration.origin, event) }
}
