import Foundation
import Synchronization
import RelayBasics

/// One accepted connection of an ``HTTP2Server``: set up on a thread of its
/// own, then served by the server's ``ServerLoop``.
final class ServerConnection: @unchecked Sendable {
    // `inbox` and `finished` are synchronized; everything else belongs to
    // the thread serving the connection: the set-up thread, then the loop's
    // (handed over under the loop's lock).

    enum Command {
        case respond(stream: Int32, response: HTTP2Response, due: UInt64)
        case reset
        case goAway(stream: Int32, graceful: Bool, response: HTTP2Response?)
        case maxConcurrentStreams(UInt32)
        case shutdown(grace: Double)
    }

    struct IncomingStream {
        var method = ""
        var path = ""
        var authority: String?
        var headers: [HTTPHeader] = []
        var body: [UInt8] = []
        /// Header bytes so far, as SETTINGS_MAX_HEADER_LIST_SIZE counts them.
        var headerBytes = 0
        /// A limit this request broke: the status to answer instead of handling it.
        var refusedWith: Int?
        /// When its first header came (MonotonicClock), for the request time limit.
        var began: UInt64 = 0
    }

    let id: Int
    /// The client's IPv4 address (network order), for the per-address cap.
    let peerAddress: UInt32
    unowned let listener: Listener
    /// Commands handed to the connection's thread (its set-up thread,
    /// then the server's loop), and whether that thread sleeps.
    private struct Inbox {
        var commands: [Command] = []
        /// The thread is in poll() (or about to be) and saw no command: the
        /// next command signals `wake`. The same rule as the client's
        /// `ConnectionHandOff.Shared.sleeping`: while the thread is awake, a
        /// command (a handler answering at once on this thread, or any
        /// other) costs no eventfd write, since the thread looks at the
        /// inbox again before it sleeps; the flag is set and read under the
        /// one lock, so no wake-up is lost.
        var sleeping = false
        /// Whom a command wakes: the set-up thread's signal, then the loop's.
        var wake: WakeSignal
    }
    private let inbox: Mutex<Inbox>
    private let finished = Atomic<Bool>(false)
    /// Its goodbye is written (``lingerDeadline`` set): nothing more goes out.
    private let lingering = Atomic<Bool>(false)
    /// The set-up thread's wake signal (the TLS handshake's poll()).
    private let setUpWake: WakeSignal
    private(set) var socket: Int32
    private var tls: TLSStream?
    /// The client's verified certificate, set by the handshake before any request is read.
    private var clientCertificate: ClientCertificate?
    private var session: NGHTTP2Session?
    private var incoming: [Int32: IncomingStream] = [:]
    /// The stream whose frames arrived last, kept out of `incoming`: a
    /// request's header block comes in one piece and its body usually right
    /// after, so its dozen headers and its data go here without a dictionary
    /// lookup each. Parked in `incoming` when another stream's frames come.
    private var current: (stream: Int32, request: IncomingStream)?
    private var scheduled: [(due: UInt64, stream: Int32, response: HTTP2Response)] = []
    /// The earliest `due` in `scheduled`, nil when it is empty: most turns
    /// have nothing delayed to look at.
    private var nextDue: UInt64?
    private var output: [UInt8] = []
    /// How the connection ends (``Closing``): its GOAWAY, and a graceful stop's steps.
    private var closing = Closing()
    /// Set once the goodbye is written: the connection drains its peer's
    /// bytes until it closes, or until this (MonotonicClock) passes.
    private var lingerDeadline: UInt64?
    /// Reads land here; kept from one turn to the next.
    private var buffer = [UInt8](repeating: 0, count: 16_384)
    /// The commands of one turn, swapped with the inbox's.
    private var pending: [Command] = []

    init(socket: Int32, id: Int, listener: Listener, peerAddress: UInt32 = 0) {
        self.socket = socket
        self.id = id
        self.peerAddress = peerAddress
        self.listener = listener
        let wake = WakeSignal()
        setUpWake = wake
        inbox = Mutex(Inbox(wake: wake))
    }

    var isFinished: Bool { finished.load(ordering: .relaxed) }
    var isLingering: Bool { lingering.load(ordering: .relaxed) }

    /// Sets up on a thread of its own (the TLS handshake may take its
    /// time), then joins the server's loop (``ServerLoop``).
    func start() {
        // The loop held strongly: this thread may end up running it.
        let loop = listener.loop
        let thread = Thread { [self] in
            if setUp() {
                loop.join(self)
            } else {
                finish()
            }
        }
        thread.name = "h2 server connection \(id)"
        thread.start()
    }

    func command(_ command: Command) {
        let wake = inbox.withLock { inbox -> WakeSignal? in
            inbox.commands.append(command)
            defer { inbox.sleeping = false }
            return inbox.sleeping ? inbox.wake : nil
        }
        wake?.signal()
    }

    /// The handshake, then the HTTP/2 session; false when either failed.
    private func setUp() -> Bool {
        guard handshake() else { return false }
        guard let session = try? NGHTTP2Session(
            client: false, delegate: self, maxConcurrentStreams: listener.configuration.maxConcurrentStreams,
            maxHeaderListSize: listener.configuration.maxHeaderListBytes.map { UInt32(clamping: $0) })
        else { return false }
        self.session = session
        return true
    }

    /// Closes the socket (unless reset) and marks the connection finished;
    /// on the thread that served it last.
    func finish() {
        if socket >= 0 { Socket.close(socket) }
        socket = -1
        session = nil
        finished.store(true, ordering: .relaxed)
    }

    /// From now on commands wake `wake` (the loop's), not the set-up thread.
    func moveWakeUps(to wake: WakeSignal) {
        inbox.withLock { $0.wake = wake }
    }

    /// Marks the connection asleep unless a command waits: false means the
    /// loop must not sleep (the command is taken next turn).
    func prepareToSleep() -> Bool {
        inbox.withLock { inbox in
            guard inbox.commands.isEmpty else { return false }
            inbox.sleeping = true
            return true
        }
    }

    /// Called by the loop when poll() returns: commands from now on need no signal.
    func awoke() {
        inbox.withLock { $0.sleeping = false }
    }

    /// The longest a turn sleeps: the request time limit is checked each turn.
    static let longestSleep: UInt64 = 1_000_000_000

    /// How long the loop may sleep for this connection: until its next
    /// delayed answer, or the end of its lingering close.
    func sleepBudget(now: UInt64) -> UInt64 {
        if let deadline = lingerDeadline { return deadline > now ? deadline - now : 0 }
        let wakeAt = min(nextDue ?? UInt64.max, closing.gracefulDeadline ?? UInt64.max)
        guard wakeAt != UInt64.max else { return Self.longestSleep }
        return wakeAt > now ? wakeAt - now : 0
    }

    /// Bytes OpenSSL already decrypted never show up in poll(): the loop reads them without sleeping.
    var hasBufferedInput: Bool { lingerDeadline == nil && tls?.hasPendingBytes == true }

    /// Output the socket did not take yet: the loop polls for writability.
    var hasOutputLeft: Bool { !output.isEmpty }

    /// The part of a turn before the loop sleeps: commands taken, delayed
    /// answers due submitted, output written. False when the connection is done.
    func turn(now: UInt64) -> Bool {
        guard let session else { return false }
        // Commands from responders and the listener, swapped out with
        // the last turn's emptied array: no allocation per turn.
        pending.removeAll(keepingCapacity: true)
        inbox.withLock { swap(&$0.commands, &pending) }
        if let deadline = lingerDeadline {
            // Closing: commands come too late to matter.
            return now < deadline
        }
        for command in pending {
            switch command {
            case .respond(let stream, let response, let due): schedule(due: due, stream: stream, response: response)
            case .reset:
                Socket.reset(socket)
                socket = -1
                return false
            case .goAway(let stream, let graceful, let response):
                session.submitGoAway(lastStream: graceful ? stream : 0)
                if graceful, let response { schedule(due: 0, stream: stream, response: response) }
                if !graceful { closing.closeNow() }
            case .maxConcurrentStreams(let value):
                session.submitMaxConcurrentStreams(value)
            case .shutdown(let grace):
                // With a grace the GOAWAY waits for the answers (``Closing``).
                if grace > 0 {
                    closing.beginGraceful(now: now, grace: UInt64(grace * 1e9))
                } else {
                    session.submitGoAway(lastStream: session.lastProcessedPeerStream)
                    closing.closeNow()
                }
            }
        }
        resetOverdueStreams(now: now, session: session)
        if let due = nextDue, due <= now {
            var next: UInt64?
            scheduled.removeAll { item in
                guard item.due <= now else {
                    next = min(next ?? item.due, item.due)
                    return false
                }
                session.submitResponse(stream: item.stream, status: item.response.status, headers: item.response.headers, body: item.response.body)
                return true
            }
            nextDue = next
        }
        guard (try? session.collectOutput(into: &output)) != nil, writeOutput() else { return false }
        // A graceful stop's PING after the last answer, then its GOAWAY.
        if closing.gracefulDeadline != nil {
            var stepped = false
            while let step = closing.next(now: now, answersWaiting: !scheduled.isEmpty) {
                switch step {
                case .ping: session.submitPing()
                case .goAway: session.submitGoAway(lastStream: session.lastProcessedPeerStream)
                }
                stepped = true
            }
            if stepped { guard (try? session.collectOutput(into: &output)) != nil, writeOutput() else { return false } }
        }
        if closing.closesNow(now: now, outputWritten: output.isEmpty) {
            beginLingering(now: now)
            return true
        }
        if !session.wantsRead, !session.wantsWrite, scheduled.isEmpty, output.isEmpty { return false }
        return true
    }

    /// The part of a turn after the loop's poll(): the socket's bytes read
    /// into the session (its handlers run here). False when the connection is done.
    func afterPoll(_ readiness: Poll.Readiness) -> Bool {
        guard let session else { return false }
        if lingerDeadline != nil { return drainWhileLingering() }
        // Bytes OpenSSL already decrypted never show up in poll(): read them now.
        guard readiness.shouldRead || tls?.hasPendingBytes == true else { return true }
        while true {
            switch buffer.withUnsafeMutableBytes({ read(into: $0) }) {
            case .bytes(let count):
                guard (try? session.receive(buffer, count: count)) != nil else { return false }
                // Nothing left inside OpenSSL: the socket's next bytes
                // show in poll(), without a read that only says EAGAIN.
                if tls?.hasPendingBytes != true { return true }
            case .wouldBlock: return true
            case .closed, .failed: return false
            }
        }
    }

    /// An answer to submit once `due` (MonotonicClock) has passed (0: next
    /// turn). Every answer goes through here: `nextDue` must know of it.
    private func schedule(due: UInt64, stream: Int32, response: HTTP2Response) {
        scheduled.append((due, stream, response))
        nextDue = min(nextDue ?? due, due)
    }

    /// The last frame (GOAWAY) is written: sends close_notify and a FIN,
    /// then reads and drops whatever the peer still sends until it closes,
    /// for at most `lingerSeconds`. Closing at once with the peer's
    /// requests unread would send an RST, and a peer's kernel that takes
    /// the RST first drops the GOAWAY unread: the client would see a reset
    /// connection instead of which streams were never processed.
    private func beginLingering(now: UInt64) {
        tls?.shutdown()
        Socket.shutdownWrite(socket)
        lingerDeadline = now + UInt64(Self.lingerSeconds * 1e9)
        lingering.store(true, ordering: .relaxed)
    }

    /// Reads and drops what a lingering connection's peer sent; false once it closed.
    private func drainWhileLingering() -> Bool {
        while true {
            switch buffer.withUnsafeMutableBytes({ read(into: $0) }) {
            case .bytes: continue
            case .wouldBlock: return true
            case .closed, .failed: return false
            }
        }
    }

    /// How long a closing connection waits for its peer to close.
    static let lingerSeconds = 2.0

    /// Reads through TLS, or from the socket itself on a cleartext listener.
    private func read(into buffer: UnsafeMutableRawBufferPointer) -> TLSStream.IOResult {
        if let tls { return tls.read(into: buffer) }
        return Socket.read(socket, into: buffer)
    }

    /// Resets every stream whose request is still incomplete past the
    /// request time limit: a client trickling a body holds a stream (and its
    /// share of the concurrent streams) no longer than that.
    private func resetOverdueStreams(now: UInt64, session: NGHTTP2Session) {
        guard let limit = listener.configuration.requestTimeLimitSeconds else { return }
        let oldest = now &- UInt64(limit * 1e9)
        if let parked = current, parked.request.began < oldest {
            current = nil
            session.submitReset(stream: parked.stream, errorCode: NGHTTP2Session.cancel)
        }
        for (stream, request) in incoming where request.began < oldest {
            incoming[stream] = nil
            session.submitReset(stream: stream, errorCode: NGHTTP2Session.cancel)
        }
    }

    private func handshake() -> Bool {
        // Cleartext: the client's connection preface is HTTP/2's first bytes.
        guard let context = listener.context else { return true }
        guard let stream = try? TLSStream(context: context, socket: socket, client: false, serverName: nil) else { return false }
        tls = stream
        let deadline = MonotonicClock.now() + 10_000_000_000
        while MonotonicClock.now() < deadline {
            guard let progress = try? stream.handshake() else { return false }
            if case .done = progress {
                clientCertificate = stream.peerCertificate()
                return stream.negotiatedProtocol == "h2"
            }
            _ = Poll.wait(socket: socket, read: progress == .wantRead, write: progress == .wantWrite, wake: setUpWake, milliseconds: 1000)
        }
        return false
    }

    /// Writes as much output as the socket takes; false when the socket failed.
    private func writeOutput() -> Bool {
        while !output.isEmpty {
            switch output.withUnsafeBytes({ bytes in tls.map { $0.write(bytes) } ?? Socket.write(socket, bytes) }) {
            case .bytes(let count): output.removeFirst(count)
            case .wouldBlock: return true
            case .closed, .failed: return false
            }
        }
        return true
    }
}

extension ServerConnection {
    /// Makes `stream` the current one: the current one is parked in
    /// `incoming` and `stream` taken out of it. False when `stream` has no
    /// request (it never began, or it ended).
    private func select(_ stream: Int32) -> Bool {
        if current?.stream == stream { return true }
        if let parked = current { incoming[parked.stream] = parked.request }
        current = incoming.removeValue(forKey: stream).map { (stream, $0) }
        return current != nil
    }
}

extension ServerConnection: NGHTTP2SessionDelegate {
    func sessionBeganHeaders(stream: Int32) {
        closing.streamBegan(stream)
        if let parked = current, parked.stream != stream { incoming[parked.stream] = parked.request }
        incoming[stream] = nil
        current = (stream, IncomingStream(began: MonotonicClock.now()))
    }

    func sessionReceivedHeader(stream: Int32, name: String, value: String) {
        guard select(stream) else { return }
        if let limit = listener.configuration.maxHeaderListBytes {
            current!.request.headerBytes += name.utf8.count + value.utf8.count + 32
            if current!.request.headerBytes > limit { current!.request.refusedWith = 431 }
        }
        guard current!.request.refusedWith == nil else { return }
        // Regular headers (most of a request's) by their first byte: no
        // string comparison with each pseudo-header name for each of them.
        guard name.utf8.first == UInt8(ascii: ":") else {
            // Room for an APNs request's headers at the first one: growing
            // the array one header at a time reallocated it four times per request.
            if current!.request.headers.capacity == 0 { current!.request.headers.reserveCapacity(Self.expectedHeaderCount) }
            current!.request.headers.append(HTTPHeader(name, value))
            return
        }
        switch name {
        case ":method": current!.request.method = value
        case ":path": current!.request.path = value
        case ":authority": current!.request.authority = value
        default: break
        }
    }

    /// Regular headers room is made for at a request's first: an APNs
    /// library's request has up to about ten (authorization and the apns-*
    /// headers), and the relay's ingress adds two.
    static let expectedHeaderCount = 16

    func sessionReceivedData(stream: Int32, bytes: UnsafeRawBufferPointer) {
        guard select(stream), current!.request.refusedWith == nil else { return }
        if let limit = listener.configuration.maxRequestBodyBytes, current!.request.body.count + bytes.count > limit {
            // The rest is dropped as it comes; the request is answered 413 when it ends.
            current!.request.refusedWith = 413
            current!.request.body = []
            return
        }
        current!.request.body.append(contentsOf: bytes)
    }

    /// The peer sends nothing more on an ended stream (nghttp2 rejects it),
    /// so the request leaves the table here rather than when the stream closes.
    func sessionStreamEnded(stream: Int32) {
        guard select(stream), let request = current?.request else { return }
        current = nil
        if let status = request.refusedWith {
            schedule(due: 0, stream: stream, response: listener.configuration.limitResponse(status))
            return
        }
        if closing.refuses(stream) {
            session?.submitReset(stream: stream, errorCode: NGHTTP2Session.refusedStream)
            return
        }
        listener.handler(
            HTTP2ServerRequest(method: request.method, path: request.path, authority: request.authority, headers: request.headers, body: request.body, connectionID: id, streamID: stream, clientCertificate: clientCertificate),
            HTTP2Responder(connection: self, stream: stream))
    }

    func sessionStreamClosed(stream: Int32, errorCode: UInt32) {
        closing.streamClosed()
        if current?.stream == stream { current = nil }
        if !incoming.isEmpty { incoming[stream] = nil }
    }
    func sessionReceivedGoAway(lastStream: Int32, errorCode: UInt32) {}
    func sessionReceivedPingAck() {
        closing.pingAcknowledgedByPeer()
    }

    func sessionReceivedReset(stream: Int32, errorCode: UInt32) {
        listener.configuration.onStreamReset?(id, stream, errorCode)
    }
    func sessionReceivedSettings() {}
}
