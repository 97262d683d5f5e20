import Foundation
import RelayBasics

extension ConnectionCore {
    /// The connection's own thread: connect, then join the loop that serves
    /// it until it is closed or broken (this thread runs that loop when no
    /// other thread does, else it ends here).
    func run() {
        do {
            try establish()
        } catch {
            finishThread(failing: error)
            return
        }
        setState(.ready)
        report(.opened)
        lastActivity = MonotonicClock.now()
        loop.join(self)
    }

    /// Why a connection whose turn said it is done was closed.
    var closedNormally: HTTP2Error { HTTP2Error(.closed, "connection to \(configuration.origin) closed") }

    /// The part of a turn of the loop before it sleeps: the hand-over
    /// taken, streams opened, deadlines acted on, output written. False
    /// when the connection is done.
    func turn(now: UInt64) throws(HTTP2Error) -> Bool {
        guard let session else { return false }
        let (closeRequested, closeDeadline) = takeIncoming()
        pendingCloseDeadline = closeRequested ? closeDeadline : nil

        if goAwayLastStream == nil, peerSettingsReceived {
            let limit = effectiveLimit(session)
            streamLimit.store(limit, ordering: .relaxed)
            while waitingHead < waiting.count, streams.count < limit {
                let pending = waiting[waitingHead]
                waitingHead += 1
                submit(pending, on: session, now: now)
            }
        }
        if waitingHead == waiting.count, waitingHead > 0 {
            // All taken: start over in the same buffer.
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        } else if waitingHead > 1024, waitingHead * 2 > waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
        expireTimedOut(now: now, session: session)

        // Keep-alive: PING after a quiet spell; no ACK in time means a dead peer.
        if let sent = pingSentAt, now - sent > UInt64(configuration.pingTimeout * 1e9) {
            report(.pingTimeout)
            throw HTTP2Error(.pingTimeout, "no PING acknowledgement from \(configuration.origin) within \(configuration.pingTimeout) s")
        }
        if pingSentAt == nil, now - lastActivity > UInt64(configuration.pingInterval * 1e9) {
            session.submitPing()
            pingSentAt = now
        }

        let busy = !streams.isEmpty || waitingHead < waiting.count
        if busy { idleSince = nil } else if idleSince == nil { idleSince = now }
        let idleExpired = idleSince.map { now - $0 > UInt64(configuration.idleTimeout * 1e9) } ?? false
        if (closeRequested && !busy) || idleExpired {
            setState(.goingAway)
            session.submitGoAway(lastStream: 0)
            try flush(session)
            return false
        }
        if closeRequested, now > closeDeadline {
            throw HTTP2Error(.connection, "connection to \(configuration.origin) closed before the answer (drain timeout)")
        }
        if goAwayLastStream != nil, streams.isEmpty { return false }
        if !session.wantsRead, !session.wantsWrite, streams.isEmpty { return false }

        try flush(session)
        return true
    }

    private func effectiveLimit(_ session: NGHTTP2Session) -> Int {
        let peer = Int(min(session.remoteMaxConcurrentStreams, UInt32(Int32.max)))
        return max(1, min(peer, configuration.maxConcurrentStreams))
    }

    private func submit(_ pending: PendingRequest, on session: NGHTTP2Session, now: UInt64) {
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
            streams[stream] = StreamState(pending: pending, deadline: pending.deadline)
            streamDeadlineBound = min(streamDeadlineBound, pending.deadline)
            streamByToken[pending.token] = stream
        } catch {
            complete(pending, .failure(error))
        }
    }

    func cancelRequest(token: UInt64) {
        if let stream = streamByToken[token], let state = streams[stream] {
            session?.submitReset(stream: stream, errorCode: NGHTTP2Session.cancel)
            removeStream(stream)
            complete(state.pending, .failure(HTTP2Error(.cancelled, "cancelled by the caller")))
        } else if let index = waiting[waitingHead...].firstIndex(where: { $0.token == token }) {
            let pending = waiting.remove(at: index)
            complete(pending, .failure(HTTP2Error(.cancelled, "cancelled by the caller")))
        }
    }

    /// Resets the streams past their deadline. The streams are only looked
    /// through once `streamDeadlineBound` has passed, not on every turn.
    private func expireTimedOut(now: UInt64, session: NGHTTP2Session) {
        if streamDeadlineBound <= now {
            var earliest = UInt64.max
            for (stream, state) in streams {
                guard state.deadline <= now else {
                    earliest = min(earliest, state.deadline)
                    continue
                }
                session.submitReset(stream: stream, errorCode: NGHTTP2Session.cancel)
                removeStream(stream)
                complete(state.pending, .failure(HTTP2Error(.timeout, "no answer from \(configuration.origin) within \(state.pending.request.timeout) s")))
            }
            streamDeadlineBound = earliest
        }
        expireWaiting(now: now)
    }

    func expireWaiting(now: UInt64) {
        // Requests still waiting for a stream slot (or for the server's
        // SETTINGS) time out too: a peer that never opens up must not hang them.
        guard waitingDeadlineBound <= now else { return }
        waitingDeadlineBound = waiting[waitingHead...].lazy.filter { $0.deadline > now }.map(\.deadline).min() ?? .max
        guard waiting[waitingHead...].contains(where: { $0.deadline <= now }) else { return }
        let (expired, kept) = waiting[waitingHead...].reduce(into: ([PendingRequest](), [PendingRequest]())) { split, pending in
            if pending.deadline <= now { split.0.append(pending) } else { split.1.append(pending) }
        }
        waiting = kept
        waitingHead = 0
        for pending in expired {
            complete(pending, .failure(HTTP2Error(.timeout, "no stream to \(configuration.origin) within \(pending.request.timeout) s")))
        }
    }

    func removeStream(_ stream: Int32) {
        if let state = streams.removeValue(forKey: stream) { streamByToken[state.pending.token] = nil }
    }

    func complete(_ pending: PendingRequest, _ result: Result<HTTP2Response, HTTP2Error>) {
        load.subtract(1, ordering: .relaxed)
        pending.finish(result)
    }

    private func flush(_ session: NGHTTP2Session) throws(HTTP2Error) {
        if outputOffset >= output.count {
            output.removeAll(keepingCapacity: true)
            outputOffset = 0
        }
        try session.collectOutput(into: &output)
        guard let tls else { return }
        while outputOffset < output.count {
            let result = output.withUnsafeBytes { bytes in
                tls.write(UnsafeRawBufferPointer(rebasing: bytes[outputOffset...]))
            }
            switch result {
            case .bytes(let count): outputOffset += count
            case .wouldBlock: return
            case .closed: throw HTTP2Error(.connection, "\(configuration.origin) closed the connection")
            case .failed(let reason): throw HTTP2Error(.connection, "write to \(configuration.origin) failed: \(reason)")
            }
        }
    }

    /// How long the loop may sleep as far as this connection goes: until
    /// the earliest deadline `turn` acts on (a deadline left out here is
    /// only noticed at the next wake-up, up to `longestSleep` late).
    func sleepBudget(now: UInt64) -> UInt64 {
        var timeout = UInt64(tuning.longestSleep * 1e9)
        func due(_ deadline: UInt64) { timeout = min(timeout, deadline > now ? deadline - now : 0) }
        // Bounds, not the exact earliest deadlines: one that is early (its
        // request already answered) costs a turn that finds the next one.
        due(streamDeadlineBound)
        due(waitingDeadlineBound)
        if let sent = pingSentAt {
            due(sent + UInt64(configuration.pingTimeout * 1e9))
        } else {
            due(lastActivity + UInt64(configuration.pingInterval * 1e9))
        }
        if let idleSince { due(idleSince + UInt64(configuration.idleTimeout * 1e9)) }
        if let pendingCloseDeadline { due(pendingCloseDeadline) }
        return timeout
    }

    /// Output left that the socket did not take: the loop waits for it to be writable.
    var hasOutputLeft: Bool { outputOffset < output.count }

    /// Bytes OpenSSL holds that poll() cannot see: the loop must not sleep.
    var hasBufferedInput: Bool { tls?.hasPendingBytes ?? false }

    /// The part of a turn after the loop's poll(): reads what has come.
    func afterPoll(_ readiness: Poll.Readiness) throws(HTTP2Error) {
        guard let tls, let session else { return }
        if readiness.shouldRead || tls.hasPendingBytes { try readAvailable(tls: tls, session: session) }
    }

    private func readAvailable(tls: TLSStream, session: NGHTTP2Session) throws(HTTP2Error) {
        while true {
            let result = readBuffer.withUnsafeMutableBytes { tls.read(into: $0) }
            switch result {
            case .bytes(let count):
                lastActivity = MonotonicClock.now()
                try session.receive(readBuffer, count: count)
            case .wouldBlock:
                return
            case .closed:
                throw HTTP2Error(.connection, "\(configuration.origin) closed the connection")
            case .failed(let reason):
                throw HTTP2Error(.connection, "connection to \(configuration.origin) failed: \(reason)")
            }
        }
    }

    /// Fails whatever is left and tells everyone the connection is gone.
    func finishThread(failing error: HTTP2Error) {
        // Observers hear of a refusal before any caller can see it fail (the
        // pool sets its reconnect backoff on `.refused`). The set-up failure
        // and the closed state change together under the lock `enqueue`
        // holds: a caller sees both or neither, so it neither gets a
        // resendable error for a connection that never came up nor picks
        // the connection again after its set-up failure showed.
        let refused = [.connectFailed, .tls, .noHTTP2].contains(error.code)
        if refused { report(.refused) }
        shared.withLock { shared in
            if refused { shared.setupFailure = error }
            setState(.closed)
        }
        if !refused { report(.closed) }
        for (stream, state) in streams {
            let unprocessed = goAwayLastStream.map { stream > $0 } ?? false
            complete(state.pending, .failure(unprocessed ? self.unprocessed("stream \(stream) above GOAWAY's last-stream-id") : error))
        }
        streams.removeAll()
        streamByToken.removeAll()
        let neverSent = Array(waiting[waitingHead...])
        waiting.removeAll()
        waitingHead = 0
        let (incoming, waiters) = shared.withLock { shared in
            shared.exited = true
            defer {
                shared.incoming.removeAll()
                shared.closeWaiters.removeAll()
            }
            return (shared.incoming, shared.closeWaiters)
        }
        for pending in neverSent + incoming {
            // Never written to the socket: safe to send elsewhere, unless the
            // connection itself never came up, which the caller should know.
            // `.unprocessed`, not `.notSent`: a connection that closes before
            // sending what it queued is the dead server HTTP2Pool's resend
            // bound is for (a server that GOAWAYs every request closes this way).
            let code: HTTP2Error.Code = refused ? error.code : .unprocessed
            complete(pending, .failure(HTTP2Error(code, error.message)))
        }
        tls?.shutdown()
        tls = nil
        session = nil
        if socket >= 0 {
            Socket.close(socket)
            socket = -1
        }
        waiters.forEach { $0.resume() }
    }
}
