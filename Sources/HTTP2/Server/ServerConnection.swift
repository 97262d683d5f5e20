import Foundation
import RelayBasics

/// One accepted connection of an ``HTTP2Server``: set up on a thread of its
/// own, then served by the server's ``ServerLoop``.
///
/// In parts, as the client's connection: ``ServerHandOff`` is what other
/// threads share with it (commands, the sleeping flag, finished and
/// lingering); everything else belongs to the thread serving it (the set-up
/// thread, then the loop's, handed over under the loop's lock):
/// ``ServerConnectionIO`` (socket, TLS, buffers, the lingering close),
/// ``IncomingRequests`` (requests as they arrive, with their limits),
/// ``ScheduledAnswers`` (answers not yet submitted) and ``Closing`` (how it
/// ends). This type makes each turn out of them.
final class ServerConnection: @unchecked Sendable {
    enum Command {
        case respond(stream: Int32, response: HTTP2Response, due: UInt64)
        case reset
        case goAway(stream: Int32, graceful: Bool, response: HTTP2Response?)
        case maxConcurrentStreams(UInt32)
        case shutdown(grace: Double)
    }

    let id: Int
    /// The client's IPv4 address (network order), for the per-address cap.
    let peerAddress: UInt32
    unowned let listener: Listener
    let handOff = ServerHandOff()
    let io: ServerConnectionIO
    var session: NGHTTP2Session?
    var requests: IncomingRequests
    var answers = ScheduledAnswers()
    /// How the connection ends (``Closing``): its GOAWAY, and a graceful stop's steps.
    var closing = Closing()
    /// The commands of one turn, swapped with the hand-off's.
    private var pending: [Command] = []

    init(socket: Int32, id: Int, listener: Listener, peerAddress: UInt32 = 0) {
        self.id = id
        self.peerAddress = peerAddress
        self.listener = listener
        io = ServerConnectionIO(socket: socket)
        requests = IncomingRequests(
            maxHeaderListBytes: listener.configuration.maxHeaderListBytes, maxRequestBodyBytes: listener.configuration.maxRequestBodyBytes)
    }

    var socket: Int32 { io.socket }
    var isFinished: Bool { handOff.isFinished }
    var isLingering: Bool { handOff.isLingering }

    /// Sets up on a thread of its own (the TLS handshake may take its
    /// time), then joins the server's loop (``ServerLoop``). When no thread
    /// can be started this throws, and the caller closes the connection.
    func start() throws(DetachedThread.StartFailure) {
        // The loop held strongly: this thread may end up running it.
        let loop = listener.loop
        let settingUp = listener.settingUp
        settingUp.value.add(1, ordering: .relaxed)
        do {
            try DetachedThread.start(name: "relay-h2ingress") { [self] in
                let up = setUp()
                settingUp.value.subtract(1, ordering: .relaxed)
                if up {
                    loop.join(self)
                } else {
                    finish()
                }
            }
        } catch {
            settingUp.value.subtract(1, ordering: .relaxed)
            throw error
        }
    }

    func command(_ command: Command) {
        handOff.send(command)
    }

    /// The handshake, then the HTTP/2 session; false when either failed.
    private func setUp() -> Bool {
        guard io.handshake(context: listener.context, wake: handOff.setUpWake) else { return false }
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
        io.close()
        session = nil
        handOff.markFinished()
    }

    /// From now on commands wake `wake` (the loop's), not the set-up thread.
    func moveWakeUps(to wake: WakeSignal) { handOff.moveWakeUps(to: wake) }

    /// Marks the connection asleep unless a command waits: false means the
    /// loop must not sleep (the command is taken next turn).
    func prepareToSleep() -> Bool { handOff.prepareToSleep() }

    /// Called by the loop when poll() returns: commands from now on need no signal.
    func awoke() { handOff.awoke() }

    /// The longest a turn sleeps: the request time limit is checked each turn.
    static let longestSleep: UInt64 = 1_000_000_000

    /// How long the loop may sleep for this connection: until its next
    /// delayed answer, or the end of its lingering close.
    func sleepBudget(now: UInt64) -> UInt64 {
        if let deadline = io.lingerDeadline { return deadline > now ? deadline - now : 0 }
        let wakeAt = min(answers.nextDue ?? UInt64.max, closing.gracefulDeadline ?? UInt64.max)
        guard wakeAt != UInt64.max else { return Self.longestSleep }
        return wakeAt > now ? wakeAt - now : 0
    }

    var hasBufferedInput: Bool { io.hasBufferedInput }
    var hasOutputLeft: Bool { io.hasOutputLeft }

    /// The part of a turn before the loop sleeps: commands taken, delayed
    /// answers due submitted, output written. False when the connection is done.
    func turn(now: UInt64) -> Bool {
        guard let session else { return false }
        // Commands from responders and the listener, swapped out with
        // the last turn's emptied array: no allocation per turn.
        handOff.take(into: &pending)
        if let deadline = io.lingerDeadline {
            // Closing: commands come too late to matter.
            return now < deadline
        }
        for command in pending {
            guard perform(command, now: now, session: session) else { return false }
        }
        if let limit = listener.configuration.requestTimeLimitSeconds {
            requests.removeBegun(before: now &- UInt64(limit * 1e9)) { session.submitReset(stream: $0, errorCode: NGHTTP2Session.cancel) }
        }
        answers.submitDue(now: now) { stream, response in
            session.submitResponse(stream: stream, status: response.status, headers: response.headers, body: response.body)
        }
        guard io.flush(session) else { return false }
        // A graceful stop's PING after the last answer, then its GOAWAY.
        if closing.gracefulDeadline != nil {
            var stepped = false
            while let step = closing.next(now: now, answersWaiting: !answers.isEmpty) {
                switch step {
                case .ping: session.submitPing()
                case .goAway: session.submitGoAway(lastStream: session.lastProcessedPeerStream)
                }
                stepped = true
            }
            if stepped { guard io.flush(session) else { return false } }
        }
        if closing.closesNow(now: now, outputWritten: !io.hasOutputLeft) {
            io.beginLingering(now: now)
            handOff.markLingering()
            return true
        }
        if !session.wantsRead, !session.wantsWrite, answers.isEmpty, !io.hasOutputLeft { return false }
        return true
    }

    /// Carries out one command; false when it ended the connection (a reset).
    private func perform(_ command: Command, now: UInt64, session: NGHTTP2Session) -> Bool {
        switch command {
        case .respond(let stream, let response, let due): answers.add(due: due, stream: stream, response: response)
        case .reset:
            io.reset()
            return false
        case .goAway(let stream, let graceful, let response):
            session.submitGoAway(lastStream: graceful ? stream : 0)
            if graceful, let response { answers.add(due: 0, stream: stream, response: response) }
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
        return true
    }

    /// The part of a turn after the loop's poll(): the socket's bytes read
    /// into the session (its handlers run here). False when the connection is done.
    func afterPoll(_ readiness: Poll.Readiness) -> Bool {
        guard let session else { return false }
        if io.lingerDeadline != nil { return io.drainWhileLingering() }
        return io.read(readiness, into: session)
    }
}
