import Foundation
import Synchronization
import RelayBasics

/// One accepted connection of an ``HTTP2Server``, on its own thread.
final class ServerConnection: @unchecked Sendable {
    // `inbox` and `finished` are synchronized; everything else belongs to
    // the connection thread.

    enum Command {
        case respond(stream: Int32, response: HTTP2Response, due: UInt64)
        case reset
        case goAway(stream: Int32, graceful: Bool, response: HTTP2Response?)
        case maxConcurrentStreams(UInt32)
        case shutdown
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
    /// Commands handed to the connection thread, and whether it sleeps.
    private struct Inbox {
        var commands: [Command] = []
        /// The thread is in poll() (or about to be) and saw no command: the
        /// next command signals `wake`. The same rule as the client's
        /// `ConnectionCore.Shared.sleeping`: while the thread is awake, a
        /// command (a handler answering at once on this thread, or any
        /// other) costs no eventfd write, since the thread looks at the
        /// inbox again before it sleeps; the flag is set and read under the
        /// one lock, so no wake-up is lost.
        var sleeping = false
    }
    private let inbox = Mutex(Inbox())
    private let finished = Atomic<Bool>(false)
    private let wake = WakeSignal()
    private var socket: Int32
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
    private var output: [UInt8] = []
    private var closeAfterFlush = false

    init(socket: Int32, id: Int, listener: Listener, peerAddress: UInt32 = 0) {
        self.socket = socket
        self.id = id
        self.peerAddress = peerAddress
        self.listener = listener
    }

    var isFinished: Bool { finished.load(ordering: .relaxed) }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "h2 server connection \(id)"
        thread.start()
    }

    func command(_ command: Command) {
        let asleep = inbox.withLock { inbox in
            inbox.commands.append(command)
            defer { inbox.sleeping = false }
            return inbox.sleeping
        }
        if asleep { wake.signal() }
    }

    private func run() {
        defer {
            if socket >= 0 { Socket.close(socket) }
            finished.store(true, ordering: .relaxed)
        }
        guard handshake() else { return }
        guard let session = try? NGHTTP2Session(
            client: false, delegate: self, maxConcurrentStreams: listener.configuration.maxConcurrentStreams,
            maxHeaderListSize: listener.configuration.maxHeaderListBytes.map { UInt32(clamping: $0) })
        else { return }
        self.session = session
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var pending: [Command] = []
        while true {
            // Commands from responders and the listener, swapped out with
            // the last turn's emptied array: no allocation per turn.
            pending.removeAll(keepingCapacity: true)
            inbox.withLock { swap(&$0.commands, &pending) }
            for command in pending {
                switch command {
                case .respond(let stream, let response, let due): scheduled.append((due, stream, response))
                case .reset:
                    Socket.reset(socket)
                    socket = -1
                    return
                case .goAway(let stream, let graceful, let response):
                    session.submitGoAway(lastStream: graceful ? stream : 0)
                    if graceful, let response { scheduled.append((0, stream, response)) }
                    if !graceful { closeAfterFlush = true }
                case .maxConcurrentStreams(let value):
                    session.submitMaxConcurrentStreams(value)
                case .shutdown:
                    session.submitGoAway(lastStream: session.lastProcessedPeerStream)
                    closeAfterFlush = true
                }
            }
            let now = MonotonicClock.now()
            resetOverdueStreams(now: now, session: session)
            scheduled.removeAll { item in
                guard item.due <= now else { return false }
                session.submitResponse(stream: item.stream, status: item.response.status, headers: item.response.headers, body: item.response.body)
                return true
            }
            guard (try? session.collectOutput(into: &output)) != nil, writeOutput() else { return }
            if closeAfterFlush, output.isEmpty {
                lingerUntilPeerCloses(buffer: &buffer)
                return
            }
            if !session.wantsRead, !session.wantsWrite, scheduled.isEmpty, output.isEmpty { return }

            // A second's turn at most: the request time limit is checked each turn.
            var next: Int32 = 1000
            if let due = scheduled.lazy.map(\.due).min() {
                next = due > now ? Int32(min((due - now) / 1_000_000 + 1, 1000)) : 0
            }
            // A command that came during this turn is taken at once: poll() only looks.
            let maySleep = inbox.withLock { inbox in
                guard inbox.commands.isEmpty else { return false }
                inbox.sleeping = true
                return true
            }
            if !maySleep { next = 0 }
            // Bytes OpenSSL already decrypted never show up in poll(): read them now.
            let shouldRead = tls?.hasPendingBytes == true
                || Poll.wait(socket: socket, read: true, write: !output.isEmpty, wake: wake, milliseconds: next).shouldRead
            inbox.withLock { $0.sleeping = false }
            if shouldRead {
                readLoop: while true {
                    switch buffer.withUnsafeMutableBytes({ read(into: $0) }) {
                    case .bytes(let count):
                        guard (try? session.receive(buffer, count: count)) != nil else { return }
                        // Nothing left inside OpenSSL: the socket's next bytes
                        // show in poll(), without a read that only says EAGAIN.
                        if tls?.hasPendingBytes != true { break readLoop }
                    case .wouldBlock: break readLoop
                    case .closed, .failed: return
                    }
                }
            }
        }
    }

    /// The last frame (GOAWAY) is written: sends close_notify and a FIN,
    /// then reads and drops whatever the peer still sends until it closes,
    /// for at most `lingerSeconds`. Closing at once with the peer's
    /// requests unread would send an RST, and a peer's kernel that takes
    /// the RST first drops the GOAWAY unread: the client would see a reset
    /// connection instead of which streams were never processed.
    private func lingerUntilPeerCloses(buffer: inout [UInt8]) {
        tls?.shutdown()
        Socket.shutdownWrite(socket)
        let deadline = MonotonicClock.now() + UInt64(Self.lingerSeconds * 1e9)
        while MonotonicClock.now() < deadline {
            switch buffer.withUnsafeMutableBytes({ read(into: $0) }) {
            case .bytes: continue
            case .wouldBlock: _ = Poll.wait(socket: socket, read: true, write: false, wake: wake, milliseconds: 100)
            case .closed, .failed: return
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
            _ = Poll.wait(socket: socket, read: progress == .wantRead, write: progress == .wantWrite, wake: wake, milliseconds: 1000)
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
            scheduled.append((0, stream, listener.configuration.limitResponse(status)))
            return
        }
        listener.handler(
            HTTP2ServerRequest(method: request.method, path: request.path, authority: request.authority, headers: request.headers, body: request.body, connectionID: id, streamID: stream, clientCertificate: clientCertificate),
            HTTP2Responder(connection: self, stream: stream))
    }

    func sessionStreamClosed(stream: Int32, errorCode: UInt32) {
        if current?.stream == stream { current = nil }
        if !incoming.isEmpty { incoming[stream] = nil }
    }
    func sessionReceivedGoAway(lastStream: Int32, errorCode: UInt32) {}
    func sessionReceivedPingAck() {}

    func sessionReceivedReset(stream: Int32, errorCode: UInt32) {
        listener.configuration.onStreamReset?(id, stream, errorCode)
    }
    func sessionReceivedSettings() {}
}
