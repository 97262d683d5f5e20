internal import CMicroHTTPD
import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The whole-request timer libmicrohttpd lacks.
///
/// libmicrohttpd's connection timeout only measures silence: a client that
/// sends one header byte every few seconds keeps its connection forever
/// (slowloris). Here each connection gets a deadline by which its current
/// request must have arrived whole, request line, headers and body:
///
/// - a new connection: `requestTimeout` from accept;
/// - between requests on a kept-alive connection: the idle allowance
///   (`idleTimeout`) from the previous answer until the next request line
///   is in, then `requestTimeout` from that request line;
/// - while a handler runs or an answer is being written: none (the
///   connection timeout still covers a client that stops reading).
///
/// A timer on a Dispatch queue (not the cooperative pool) shuts down the
/// socket of every connection past its deadline; libmicrohttpd then sees
/// the end of the stream and closes the connection itself. The socket is
/// only `shutdown()`, never closed here, and only under the lock that the
/// connection-closed notification also takes to drop its entry: libmicrohttpd
/// calls that notification before it closes the descriptor (daemon.c,
/// MHD_cleanup_connections and the new-connection error path), so an entry
/// present under the lock names a descriptor that is still this connection's,
/// and a reused descriptor is never touched.
final class RequestDeadlines: @unchecked Sendable {
    // Unchecked for `timer` alone: set in init, then only cancelled, which
    // Dispatch allows from any thread. Everything else is a lock or an atomic.
    private struct Entry {
        var socket: Int32
        /// When the request now arriving started; nil while none is arriving.
        var requestStarted: ContinuousClock.Instant?
        /// When the previous answer went out, while waiting for the next request line.
        var idleSince: ContinuousClock.Instant?
        var cut = false

        /// A request starts arriving, unless one already is.
        mutating func startRequest(at now: ContinuousClock.Instant) {
            guard requestStarted == nil else { return }
            requestStarted = now
            idleSince = nil
        }

        /// No request arriving; idle since `idleSince` (nil: handled, no deadline).
        mutating func wait(idleSince: ContinuousClock.Instant?) {
            requestStarted = nil
            self.idleSince = idleSince
        }
    }

    let requestTimeout: Duration
    let idleTimeout: Duration
    /// By connection, and whether stopped: once stopped nothing is tracked or cut.
    private struct Tracked {
        var entries: [Int: Entry] = [:]
        var stopped = false
    }

    private let state = Mutex(Tracked())
    private let cutCount = Atomic<Int>(0)
    private let timer: any DispatchSourceTimer

    init(requestTimeoutSeconds: Int, idleTimeoutSeconds: Int) {
        requestTimeout = .seconds(max(1, requestTimeoutSeconds))
        idleTimeout = .seconds(max(1, idleTimeoutSeconds, requestTimeoutSeconds))
        // Checked four times per timeout (at most once a second), so a
        // connection lives at most a quarter of the timeout past its deadline.
        let period = max(50, min(4, requestTimeoutSeconds) * 250)
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "apns-relay.http.request-deadlines"))
        timer.schedule(deadline: .now() + .milliseconds(period), repeating: .milliseconds(period), leeway: .milliseconds(period / 4))
        timer.setEventHandler { [weak self] in self?.reap() }
        timer.resume()
    }

    deinit { timer.cancel() }

    /// Connections cut for not sending their request in time, since start.
    var cut: Int { cutCount.load(ordering: .relaxed) }

    /// Connections being tracked (open, as libmicrohttpd counts them).
    var tracked: Int { state.withLock { $0.entries.count } }

    /// Stops cutting, at once: called before the daemon stops, so a socket
    /// libmicrohttpd closes while stopping can never be shut down after its
    /// descriptor was reused, whatever order the notifications come in.
    func stop() {
        state.withLock { $0 = Tracked(entries: [:], stopped: true) }
        timer.cancel()
    }

    func opened(_ connection: OpaquePointer) {
        let socket = apns_relay_mhd_connection_fd(connection)
        guard socket >= 0 else { return }
        let now = ContinuousClock.now
        state.withLock { tracked in
            guard !tracked.stopped else { return }
            tracked.entries[key(connection)] = Entry(socket: socket, requestStarted: now)
        }
    }

    /// The request line is in: a kept-alive connection's next request starts now.
    func requestLineArrived(_ connection: OpaquePointer) {
        let now = ContinuousClock.now
        update(connection) { $0.startRequest(at: now) }
    }

    /// The request arrived whole: no deadline while it is handled and answered.
    func requestReceived(_ connection: OpaquePointer) {
        update(connection) { $0.wait(idleSince: nil) }
    }

    /// The answer is out: the connection may idle until the next request.
    func answered(_ connection: OpaquePointer) {
        let now = ContinuousClock.now
        update(connection) { $0.wait(idleSince: now) }
    }

    /// Changes `connection`'s entry in place, if it is tracked. Each request
    /// passes here three times on libmicrohttpd's thread: the entry is found
    /// by one index lookup and changed through it. The optional-chained
    /// `entries?[key]?.change()` it replaces went through the dictionary's
    /// and the optional's modify accessors, about eight heap allocations
    /// per call.
    @inline(__always)
    private func update(_ connection: OpaquePointer, _ change: (inout Entry) -> Void) {
        let key = key(connection)
        state.withLock { tracked in
            guard let index = tracked.entries.index(forKey: key) else { return }
            change(&tracked.entries.values[index])
        }
    }

    /// libmicrohttpd is about to close the socket: forget it first.
    func closed(_ connection: OpaquePointer) {
        _ = state.withLock { $0.entries.removeValue(forKey: key(connection)) }
    }

    private func reap() {
        let now = ContinuousClock.now
        state.withLock { tracked in
            guard !tracked.stopped else { return }
            var entries = tracked.entries
            defer { tracked.entries = entries }
            for (connection, entry) in entries where !entry.cut {
                let overdue: Bool
                if let started = entry.requestStarted {
                    overdue = started.duration(to: now) > requestTimeout
                } else if let idle = entry.idleSince {
                    overdue = idle.duration(to: now) > idleTimeout
                } else {
                    overdue = false
                }
                guard overdue else { continue }
                // Under the lock: `closed` cannot have run, so the descriptor
                // is still this connection's (see the type's comment).
                shutdown(entry.socket, Int32(SHUT_RDWR))
                entries[connection]?.cut = true
                cutCount.add(1, ordering: .relaxed)
            }
        }
    }

    private func key(_ connection: OpaquePointer) -> Int { Int(bitPattern: connection) }
}
