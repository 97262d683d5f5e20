import RelayBasics

/// The HTTP/2 side of one client connection, on the connection's thread:
/// the nghttp2 session (made by `open()` once TLS is up), the callbacks it
/// reports received frames through (`ClientSession+Callbacks.swift`), the
/// stream table they fill, and what the peer has told us (its SETTINGS,
/// GOAWAY and PING acknowledgement).
///
/// It takes requests from the hand-over into the table, opens streams for
/// them, cancels and expires them, and answers each one exactly once,
/// through `handOff.complete`. It does no I/O: the connection's
/// `ConnectionIO` moves the session's bytes.
final class ClientSession {
    let configuration: HTTP2Connection.Configuration
    /// `:authority` for requests that name none: made once, not per request.
    private let defaultAuthority: String
    let handOff: ConnectionHandOff
    let events: ConnectionEvents
    /// Nil until TLS is up, and again once the connection has ended. The
    /// session keeps this object as its delegate, unowned: it lives as long.
    private(set) var session: NGHTTP2Session?
    /// Written by this type and by its callbacks only.
    var table = StreamTable()
    private var taken = ConnectionHandOff.Taken()
    /// The last stream a GOAWAY from the server said it may process.
    var goAwayLastStream: Int32?
    /// Streams the server answered on this connection (for ``unprocessed(_:)``).
    var answeredStreams = 0
    /// Streams wait for the server's SETTINGS so its concurrency limit is known.
    var peerSettingsReceived = false
    /// When our PING went out, until its acknowledgement comes.
    var pingSentAt: UInt64?

    init(configuration: HTTP2Connection.Configuration, handOff: ConnectionHandOff, events: ConnectionEvents) {
        self.configuration = configuration
        self.handOff = handOff
        self.events = events
        defaultAuthority = configuration.port == 443 ? configuration.host : configuration.origin
    }

    /// Starts the HTTP/2 session, once TLS is up: our SETTINGS are its first output.
    func open() throws(HTTP2Error) {
        session = try NGHTTP2Session(client: true, delegate: self, maxConcurrentStreams: nil)
    }

    /// Ends the session; what it had not written yet goes with it.
    func close() {
        session = nil
    }

    /// Moves requests handed over by other threads into the table and
    /// applies cancellations, in that order (see `ConnectionHandOff.enqueue`).
    /// Returns the close request.
    func takeIncoming() -> (closeRequested: Bool, closeDeadline: UInt64) {
        // Swapped with spare arrays, not copied out and cleared: clearing an
        // array whose buffer the copy still shares allocated a fresh buffer
        // on every turn.
        let close = handOff.take(swapping: &taken)
        table.appendWaiting(taken.incoming)
        taken.incoming.removeAll(keepingCapacity: true)
        if !taken.cancelled.isEmpty {
            for token in taken.cancelled { cancelRequest(token: token) }
            taken.cancelled.removeAll(keepingCapacity: true)
        }
        return close
    }

    /// Opens streams for waiting requests, up to the effective limit, once
    /// the server's SETTINGS have come and unless it is going away.
    func openWaitingStreams() {
        if goAwayLastStream == nil, peerSettingsReceived, let session {
            let limit = effectiveLimit(session)
            handOff.streamLimit.store(limit, ordering: .relaxed)
            while table.openCount < limit, let pending = table.nextWaiting() {
                submit(pending, on: session)
            }
        }
        table.compactWaiting()
    }

    private func effectiveLimit(_ session: NGHTTP2Session) -> Int {
        let peer = Int(min(session.remoteMaxConcurrentStreams, UInt32(Int32.max)))
        return max(1, min(peer, configuration.maxConcurrentStreams))
    }

    private func submit(_ pending: PendingRequest, on session: NGHTTP2Session) {
        let request = pending.request
        var headers: [HTTPHeader] = []
        headers.reserveCapacity(5 + request.headers.count)
        headers.append(HTTPHeader(":method", request.method))
        headers.append(HTTPHeader(":scheme", "https"))
        headers.append(HTTPHeader(":authority", request.authority ?? defaultAuthority))
        headers.append(HTTPHeader(":path", request.path))
        headers.append(contentsOf: request.headers)
        if !request.body.isEmpty { headers.append(HTTPHeader("content-length", String(request.body.count))) }
        do {
            let stream = try session.submitRequest(headers: headers, body: request.body)
            table.open(stream, for: pending)
        } catch {
            complete(pending, .failure(error))
        }
    }

    func cancelRequest(token: UInt64) {
        if let removed = table.remove(token: token) {
            session?.submitReset(stream: removed.stream, errorCode: NGHTTP2Session.cancel)
            complete(removed.record.pending, .failure(HTTP2Error(.cancelled, "cancelled by the caller")))
        } else if let pending = table.removeWaiting(token: token) {
            complete(pending, .failure(HTTP2Error(.cancelled, "cancelled by the caller")))
        }
    }

    /// Resets the streams past their deadline and fails the waiting
    /// requests past theirs.
    func expireTimedOut(now: UInt64) {
        for (stream, record) in table.removeExpiredStreams(now: now) {
            session?.submitReset(stream: stream, errorCode: NGHTTP2Session.cancel)
            complete(record.pending, .failure(HTTP2Error(
                .timeout, "no answer from \(configuration.origin) within \(record.pending.request.timeout) s", written: record.requestWritten)))
        }
        expireWaiting(now: now)
    }

    /// Requests still waiting for a stream slot (or for the server's
    /// SETTINGS) time out too: a peer that never opens up must not hang them.
    func expireWaiting(now: UInt64) {
        for pending in table.removeExpiredWaiting(now: now) {
            complete(pending, .failure(HTTP2Error(.timeout, "no stream to \(configuration.origin) within \(pending.request.timeout) s")))
        }
    }

    /// Keep-alive: a PING whose acknowledgement clears `pingSentAt`.
    func submitPing(now: UInt64) {
        session?.submitPing()
        pingSentAt = now
    }

    func complete(_ pending: PendingRequest, _ result: Result<HTTP2Response, HTTP2Error>) {
        handOff.complete(pending, result)
    }

    /// A sent request the server did not process, saying whether the server
    /// processed other streams here (``HTTP2Error/serverMadeProgress``).
    func unprocessed(_ message: String) -> HTTP2Error {
        var error = HTTP2Error(.unprocessed, message)
        error.serverMadeProgress = answeredStreams > 0 || (goAwayLastStream ?? 0) > 0
        return error
    }

    /// The connection is ending with `error`: fails every request on a
    /// stream (one above a GOAWAY's last-stream-id as unprocessed) and
    /// takes the waiting ones, never written, for the caller to fail.
    func failStreams(with error: HTTP2Error) -> ArraySlice<PendingRequest> {
        for (stream, record) in table.removeAllStreams() {
            let unprocessed = goAwayLastStream.map { stream > $0 } ?? false
            var failure = error
            failure.requestWritten = record.requestWritten
            complete(record.pending, .failure(unprocessed ? self.unprocessed("stream \(stream) above GOAWAY's last-stream-id") : failure))
        }
        return table.takeWaiting()
    }
}

/// Tells a connection's observer of its life's events, naming its origin.
struct ConnectionEvents: Sendable {
    let origin: String
    let observer: HTTP2EventObserver?

    func report(_ event: HTTP2ConnectionEvent) { observer?(origin, event) }
}
