import RelayBasics

extension ConnectionCore {
    /// Why a connection whose turn said it is done was closed.
    var closedNormally: HTTP2Error { HTTP2Error(.closed, "connection to \(configuration.origin) closed") }

    /// The part of a turn of the loop before it sleeps: the hand-over
    /// taken, streams opened, deadlines acted on, output written. False
    /// when the connection is done.
    func turn(now: UInt64) throws(HTTP2Error) -> Bool {
        guard let session = client.session else { return false }
        let (closeRequested, closeDeadline) = client.takeIncoming()
        pendingCloseDeadline = closeRequested ? closeDeadline : nil
        client.openWaitingStreams()
        client.expireTimedOut(now: now)

        // Keep-alive: PING after a quiet spell; no ACK in time means a dead peer.
        if let sent = client.pingSentAt, now - sent > UInt64(configuration.pingTimeout * 1e9) {
            events.report(.pingTimeout)
            throw HTTP2Error(.pingTimeout, "no PING acknowledgement from \(configuration.origin) within \(configuration.pingTimeout) s")
        }
        if client.pingSentAt == nil, now - io.lastActivity > UInt64(configuration.pingInterval * 1e9) {
            client.submitPing(now: now)
        }

        let hasOpenStreams = client.table.hasOpenStreams
        let busy = hasOpenStreams || client.table.hasWaiting
        if busy { idleSince = nil } else if idleSince == nil { idleSince = now }
        let idleExpired = idleSince.map { now - $0 > UInt64(configuration.idleTimeout * 1e9) } ?? false
        if (closeRequested && !busy) || idleExpired {
            handOff.setState(.goingAway)
            session.submitGoAway(lastStream: 0)
            try io.flush(session)
            return false
        }
        if closeRequested, now > closeDeadline {
            throw HTTP2Error(.connection, "connection to \(configuration.origin) closed before the answer (drain timeout)")
        }
        if client.goAwayLastStream != nil, !hasOpenStreams { return false }
        if !session.wantsRead, !session.wantsWrite, !hasOpenStreams { return false }

        try io.flush(session)
        return true
    }

    /// How long the loop may sleep as far as this connection goes: until
    /// the earliest deadline `turn` acts on (a deadline left out here is
    /// only noticed at the next wake-up, up to `longestSleep` late).
    func sleepBudget(now: UInt64) -> UInt64 {
        var timeout = UInt64(tuning.longestSleep * 1e9)
        func due(_ deadline: UInt64) { timeout = min(timeout, deadline > now ? deadline - now : 0) }
        // Bounds, not the exact earliest deadlines: one that is early (its
        // request already answered) costs a turn that finds the next one.
        due(client.table.streamDeadlineBound)
        due(client.table.waitingDeadlineBound)
        if let sent = client.pingSentAt {
            due(sent + UInt64(configuration.pingTimeout * 1e9))
        } else {
            due(io.lastActivity + UInt64(configuration.pingInterval * 1e9))
        }
        if let idleSince { due(idleSince + UInt64(configuration.idleTimeout * 1e9)) }
        if let pendingCloseDeadline { due(pendingCloseDeadline) }
        return timeout
    }

    /// The part of a turn after the loop's poll(): reads what has come.
    func afterPoll(_ readiness: Poll.Readiness) throws(HTTP2Error) {
        guard let session = client.session else { return }
        try io.afterPoll(readiness, into: session)
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
        if refused { events.report(.refused) }
        handOff.markClosed(setupFailure: refused ? error : nil)
        if !refused { events.report(.closed) }
        let neverSent = client.failStreams(with: error)
        let (incoming, waiters) = handOff.exit()
        for pending in neverSent + incoming {
            // Never written to the socket: safe to send elsewhere, unless the
            // connection itself never came up, which the caller should know.
            // `.unprocessed`, not `.notSent`: a connection that closes before
            // sending what it queued is the dead server HTTP2Pool's resend
            // bound is for (a server that GOAWAYs every request closes this way).
            let code: HTTP2Error.Code = refused ? error.code : .unprocessed
            handOff.complete(pending, .failure(HTTP2Error(code, error.message)))
        }
        io.close()
        client.close()
        waiters.forEach { $0.resume() }
    }
}
