import Foundation

extension ConnectionCore {
    /// Connects, handshakes TLS and checks ALPN, on the connection thread.
    ///
    /// Setting up can take up to `connectTimeout` twice over (TCP, then TLS),
    /// far longer than a request's own timeout, so every wait here also
    /// watches the wake-up eventfd: requests that time out or are cancelled
    /// while the connection is still coming up end at once, not after it.
    func establish() throws(HTTP2Error) {
        let connectDeadline = deadline(after: configuration.connectTimeout)
        socket = try Socket.connect(host: configuration.host, port: configuration.port, timeout: configuration.connectTimeout) { fd throws(HTTP2Error) in
            try waitDuringSetup(on: fd, writing: true, until: connectDeadline)
        }
        let context = try TLSContext(client: configuration.tls)
        let stream = try TLSStream(context: context, socket: socket, client: true, serverName: configuration.tls.serverName ?? configuration.host)
        tls = stream
        let handshakeDeadline = deadline(after: configuration.connectTimeout)
        while true {
            let progress = try stream.handshake()
            if case .done = progress { break }
            guard try waitDuringSetup(on: socket, writing: progress == .wantWrite, until: handshakeDeadline) else {
                throw HTTP2Error(.tls, "TLS handshake with \(configuration.origin) timed out after \(configuration.connectTimeout) s")
            }
        }
        guard stream.negotiatedProtocol == "h2" else {
            throw HTTP2Error(.noHTTP2, "\(configuration.origin) did not agree to HTTP/2 in ALPN (got \(stream.negotiatedProtocol ?? "nothing"))")
        }
        session = try NGHTTP2Session(client: true, delegate: self, maxConcurrentStreams: nil)
    }

    /// Waits until `fd` is ready for `events`; false once `deadline` passes.
    /// Meanwhile takes in new requests and ends the cancelled and expired
    /// ones, and gives up when closed with nothing left to send (or once the
    /// drain time is over).
    private func waitDuringSetup(on fd: Int32, writing: Bool, until deadline: UInt64) throws(HTTP2Error) -> Bool {
        while true {
            let now = Clock.now()
            let close = takeIncoming()
            expireWaiting(now: now)
            if close.closeRequested, waitingHead == waiting.count || now >= close.closeDeadline {
                throw HTTP2Error(.closed, "connection to \(configuration.origin) closed while connecting")
            }
            guard now < deadline else { return false }
            var timeout = deadline - now
            if close.closeRequested { timeout = min(timeout, close.closeDeadline - now) }
            if let first = waiting[waitingHead...].map(\.deadline).min() { timeout = min(timeout, first > now ? first - now : 0) }
            let ready = Poll.wait(socket: fd, read: !writing, write: writing, wake: wake, milliseconds: Poll.milliseconds(fromNanoseconds: timeout))
            if ready.any { return true }
        }
    }

    /// Moves requests handed over by other threads into `waiting` and applies
    /// cancellations, in that order (see `enqueue`). Returns the close request.
    func takeIncoming() -> (closeRequested: Bool, closeDeadline: UInt64) {
        let (incoming, cancelled, closeRequested, closeDeadline) = shared.withLock { shared in
            defer {
                shared.incoming.removeAll(keepingCapacity: true)
                shared.cancelled.removeAll(keepingCapacity: true)
                // Anything handed over from now on signals again (see `wakeIfNeeded`).
                shared.wakePending = false
            }
            return (shared.incoming, shared.cancelled, shared.closeRequested, shared.closeDeadline)
        }
        waiting.append(contentsOf: incoming)
        for token in cancelled { cancelRequest(token: token) }
        return (closeRequested, closeDeadline)
    }

    private func deadline(after seconds: Double) -> UInt64 { Clock.now() + UInt64(max(0, seconds) * 1e9) }
}
