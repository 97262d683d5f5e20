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
///
/// It also keeps the connection count under `connectionLimit` by shedding
/// (see ``opened(_:)``): libmicrohttpd's own limit is set above it, so a
/// flood of idle or dribbling sockets from many addresses, each under the
/// per-address cap, can never hold the listener at its limit (where new
/// clients wait in the kernel's backlog until a deadline cuts someone).
final class RequestDeadlines: @unchecked Sendable {
    // Unchecked for `timer` alone: set in init, then only cancelled, which
    // Dispatch allows from any thread. Everything else is a lock or an atomic.
    private struct Entry {
        var socket: Int32
        /// The client's IPv4 address (network order; 0 unknown), for shedding.
        var address: UInt32
        /// When the connection was accepted: the oldest are shed first.
        var opened: ContinuousClock.Instant
        /// Whether a request was answered on it: a connection that has
        /// worked is shed only after every one that has not.
        var served = false
        /// When the request now arriving started; nil while none is arriving.
        var requestStarted: ContinuousClock.Instant?
        /// When the previous answer went out, while waiting for the next request line.
        var idleSince: ContinuousClock.Instant?
        var cut = false

        /// Still owes its first request: what shedding takes first.
        var isWaiting: Bool { !served && !cut && requestStarted != nil }

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
    /// Connections kept open at most; one more sheds one (0: no shedding).
    let connectionLimit: Int
    /// By connection, and whether stopped: once stopped nothing is tracked or cut.
    private struct Tracked {
        var entries: [Int: Entry] = [:]
        var stopped = false
        /// Entries cut (socket shut down) that libmicrohttpd has not closed yet.
        var cutPending = 0
        /// Unserved, uncut connections still sending their first request, by
        /// address: the address holding most of them loses one first.
        var waitingByAddress: [UInt32: Int] = [:]

        /// Open connections that are not already on their way out.
        var live: Int { entries.count - cutPending }

        mutating func markCut(_ key: Int) {
            guard let index = entries.index(forKey: key), !entries.values[index].cut else { return }
            change(at: index) { $0.cut = true }
            cutPending += 1
        }

        /// Changes one entry, keeping ``waitingByAddress`` in step with it.
        mutating func change(at index: Dictionary<Int, Entry>.Index, _ body: (inout Entry) -> Void) {
            let wasWaiting = entries.values[index].isWaiting
            body(&entries.values[index])
            let entry = entries.values[index]
            if wasWaiting, !entry.isWaiting { forgetWaiting(entry.address) }
            if !wasWaiting, entry.isWaiting { waitingByAddress[entry.address, default: 0] += 1 }
        }

        mutating func forgetWaiting(_ address: UInt32) {
            guard let count = waitingByAddress[address] else { return }
            if count <= 1 { waitingByAddress.removeValue(forKey: address) } else { waitingByAddress[address] = count - 1 }
        }
    }

    private let state = Mutex(Tracked())
    private let cutCount = Atomic<Int>(0)
    private let shedCount = Atomic<Int>(0)
    private let timer: any DispatchSourceTimer
    /// The daemon's accept, stopped at the open-file limit until one of its
    /// connections closes; nil: not watched.
    private let acceptSuspension: MHDAcceptSuspension?

    init(requestTimeoutSeconds: Int, idleTimeoutSeconds: Int, connectionLimit: Int = 0, acceptSuspension: MHDAcceptSuspension? = nil) {
        self.connectionLimit = max(0, connectionLimit)
        self.acceptSuspension = acceptSuspension
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

    /// Connections shed to keep the count under ``connectionLimit``, or to
    /// make a daemon that stopped accepting at the open-file limit accept
    /// again, since start.
    var shed: Int { shedCount.load(ordering: .relaxed) }

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
        let address = apns_relay_mhd_connection_ipv4(connection)
        let now = ContinuousClock.now
        let newcomer = key(connection)
        state.withLock { tracked in
            guard !tracked.stopped else { return }
            tracked.entries[newcomer] = Entry(socket: socket, address: address, opened: now, requestStarted: now)
            tracked.waitingByAddress[address, default: 0] += 1
            guard connectionLimit > 0, tracked.live > connectionLimit else { return }
            shed(Self.shedCandidate(in: tracked, sparing: newcomer) ?? newcomer, in: &tracked)
        }
    }

    /// Shuts `victim`'s socket down (libmicrohttpd then closes it), marks it
    /// cut and counts it shed. Under the lock: every entry's descriptor is
    /// still its connection's.
    private func shed(_ victim: Int, in tracked: inout Tracked) {
        if let entry = tracked.entries[victim] { shutdown(entry.socket, Int32(SHUT_RDWR)) }
        tracked.markCut(victim)
        shedCount.add(1, ordering: .relaxed)
    }

    /// Which connection to close when one more than ``connectionLimit`` is
    /// open, or nil for none but the newcomer:
    ///
    /// 1. one that has not completed a request yet (idle since accept, or
    ///    still dribbling its first head): from the address that holds the
    ///    most of those, the oldest; a flood from many addresses loses its
    ///    sockets before a client with one connection loses its own;
    /// 2. else a kept-alive connection idle between requests, the longest idle.
    ///
    /// Never one whose request is being handled or whose next request is
    /// arriving after it was served: those are working clients. O(entries).
    private static func shedCandidate(in tracked: Tracked, sparing newcomer: Int) -> Int? {
        var busiest: (address: UInt32, count: Int)?
        for (address, count) in tracked.waitingByAddress where count > (busiest?.count ?? 0) { busiest = (address, count) }
        var waiting: (key: Int, since: ContinuousClock.Instant)?
        var idle: (key: Int, since: ContinuousClock.Instant)?
        var anyWaiting: (key: Int, since: ContinuousClock.Instant)?
        for (key, entry) in tracked.entries where key != newcomer && !entry.cut {
            if entry.isWaiting {
                if entry.address == busiest?.address, entry.opened < (waiting?.since ?? entry.opened + .seconds(1)) {
                    waiting = (key, entry.opened)
                }
                if entry.opened < (anyWaiting?.since ?? entry.opened + .seconds(1)) { anyWaiting = (key, entry.opened) }
            } else if let since = entry.idleSince, since < (idle?.since ?? since + .seconds(1)) {
                idle = (key, since)
            }
        }
        // The busiest address may be the newcomer's alone: then any other waiting one.
        return waiting?.key ?? anyWaiting?.key ?? idle?.key
    }

    /// The request line is in: a kept-alive connection's next request starts now.
    func requestLineArrived(_ connection: OpaquePointer) {
        let now = ContinuousClock.now
        update(connection) { $0.startRequest(at: now) }
    }

    /// The request arrived whole: no deadline while it is handled and answered.
    func requestReceived(_ connection: OpaquePointer) {
        // Served from now on: shed only after every connection still owing its first request.
        update(connection) { entry in
            entry.served = true
            entry.wait(idleSince: nil)
        }
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
            tracked.change(at: index, change)
        }
    }

    /// libmicrohttpd is about to close the socket: forget it first.
    func closed(_ connection: OpaquePointer) {
        state.withLock { tracked in
            guard let entry = tracked.entries.removeValue(forKey: key(connection)) else { return }
            if entry.cut { tracked.cutPending -= 1 }
            if entry.isWaiting { tracked.forgetWaiting(entry.address) }
        }
    }

    private func reap() {
        let now = ContinuousClock.now
        state.withLock { tracked in
            guard !tracked.stopped else { return }
            var overdueKeys: [Int] = []
            for (connection, entry) in tracked.entries where !entry.cut {
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
                overdueKeys.append(connection)
                cutCount.add(1, ordering: .relaxed)
            }
            for connection in overdueKeys { tracked.markCut(connection) }
            // libmicrohttpd stopped accepting at the open-file limit, until
            // one of its connections closes. With a descriptor free again
            // and none closing already, the next answer would close one
            // (MHDAcceptSuspension); with every connection idle or waiting
            // for its first request no answer comes, and a new client
            // waited for an idle or request timeout (30 s, 15 s). The one
            // shedding would take is closed now; with every connection
            // busy, an answer closes one after all.
            guard tracked.cutPending == 0, let suspension = acceptSuspension, suspension.closesConnectionNow() else { return }
            guard let victim = Self.shedCandidate(in: tracked, sparing: 0), tracked.entries[victim] != nil else {
                suspension.restore()
                return
            }
            shed(victim, in: &tracked)
        }
    }

    private func key(_ connection: OpaquePointer) -> Int { Int(bitPattern: connection) }
}
