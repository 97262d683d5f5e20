import RelayBasics
import Foundation

extension ConnectionCore {
    /// Connects, handshakes TLS and checks ALPN, on the connection thread.
    ///
    /// Setting up can take up to `connectTimeout` twice over (TCP, then TLS),
    /// far longer than a request's own timeout, so every wait here also
    /// watches the wake-up eventfd: requests that time out or are cancelled
    /// while the connection is still coming up end at once, not after it.
    func establish() throws(HTTP2Error) {
        // A process out of descriptors made these without one: fail the
        // set-up like a refused connect (the pool backs off and retries).
        if let problem = handOff.setupWake.failure ?? loop.wake.failure {
            throw HTTP2Error(.connectFailed, "cannot connect to \(configuration.origin): no descriptor for its wake-up (eventfd: \(problem))")
        }
        let connectDeadline = deadline(after: configuration.connectTimeout)
        let addresses = try lookUpHost(until: connectDeadline)
        let socket = try Socket.connect(
            to: addresses, host: configuration.host, port: configuration.port, timeout: configuration.connectTimeout
        ) { fd throws(HTTP2Error) in
            try waitDuringSetup(on: fd, writing: true, until: connectDeadline)
        }
        io.socket = socket
        let context = try TLSContext(client: configuration.tls)
        let stream = try TLSStream(context: context, socket: socket, client: true, serverName: configuration.tls.serverName ?? configuration.host)
        io.tls = stream
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
        try client.open()
    }

    /// The host's addresses, looked up on a thread of its own
    /// (``HostLookup``) while this one goes on taking in and expiring
    /// requests: a resolver that does not answer ends the connect at its
    /// deadline, and a queued request at its own, not at `getaddrinfo`'s
    /// (resolv.conf's `timeout × attempts` for each server).
    private func lookUpHost(until deadline: UInt64) throws(HTTP2Error) -> [HostLookup.Address] {
        let lookup = configuration.lookUp(configuration.host, configuration.port)
        let outcome = try lookup.outcome { descriptor throws(HTTP2Error) in
            try waitDuringSetup(on: descriptor, writing: false, until: deadline)
        }
        switch outcome {
        case .addresses(let addresses)?:
            return addresses
        case .failed(let message)?:
            throw HTTP2Error(.connectFailed, "cannot resolve \(configuration.host): \(message)")
        case nil:
            throw HTTP2Error(
                .connectFailed, "cannot resolve \(configuration.host): the resolver did not answer within \(configuration.connectTimeout) s")
        }
    }

    /// Waits until `fd` is ready for `events`; false once `deadline` passes.
    /// Meanwhile takes in new requests and ends the cancelled and expired
    /// ones, and gives up when closed with nothing left to send (or once the
    /// drain time is over).
    private func waitDuringSetup(on fd: Int32, writing: Bool, until deadline: UInt64) throws(HTTP2Error) -> Bool {
        while true {
            let now = MonotonicClock.now()
            let close = client.takeIncoming()
            client.expireWaiting(now: now)
            if close.closeRequested, !client.table.hasWaiting || now >= close.closeDeadline {
                throw HTTP2Error(.closed, "connection to \(configuration.origin) closed while connecting")
            }
            guard now < deadline else { return false }
            var timeout = deadline - now
            if close.closeRequested { timeout = min(timeout, close.closeDeadline - now) }
            let waitingDeadlineBound = client.table.waitingDeadlineBound
            timeout = min(timeout, waitingDeadlineBound > now ? waitingDeadlineBound - now : 0)
            let ready = sleepingPoll(socket: fd, read: !writing, write: writing, nanoseconds: timeout)
            if ready.any { return true }
        }
    }

    /// poll() on `socket` and the eventfd for up to `nanoseconds`, under the
    /// needs-wake-up protocol (`ConnectionHandOff.Shared.sleeping`): when
    /// something was handed over since the last `takeIncoming`, it only
    /// looks (timeout 0), so the caller's next turn takes the hand-over
    /// without anyone having to write the eventfd.
    private func sleepingPoll(socket: Int32, read: Bool, write: Bool, nanoseconds: UInt64) -> Poll.Readiness {
        tuning.beforeSleep?()
        let sleep = handOff.prepareToSleep()
        let cap = Int32(clamping: Int64(tuning.longestSleep * 1000))
        let milliseconds = sleep ? Poll.milliseconds(fromNanoseconds: nanoseconds, cap: cap) : 0
        let ready = Poll.wait(socket: socket, read: read, write: write, wake: handOff.setupWake, milliseconds: milliseconds)
        if sleep { handOff.awoke() }
        return ready
    }

    private func deadline(after seconds: Double) -> UInt64 { MonotonicClock.now() + UInt64(max(0, seconds) * 1e9) }
}
