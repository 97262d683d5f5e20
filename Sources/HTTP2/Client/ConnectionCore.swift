import Foundation
import RelayBasics

/// One client connection's thread side, in parts with one owner each:
///
/// - `handOff` (`ConnectionHandOff`): what callers' threads share with the
///   connection thread (the hand-over queue, state, load, stream limit,
///   wake-ups); the only part any thread may touch, all of it synchronized.
/// - `client` (`ClientSession`): the nghttp2 session, its callbacks and the
///   stream table, where every request taken from the hand-over is held and
///   answered once.
/// - `io` (`ConnectionIO`): socket, TLS and buffers.
///
/// This type runs the connection's life on its own thread (set up, then
/// join its `ConnectionLoop`), makes a turn of the loop out of those parts,
/// and owns what only a turn decides: the idle and close timers.
final class ConnectionCore: @unchecked Sendable {
    // Thread discipline: `handOff` is synchronized and the `let`s never
    // change; the state of `client` and `io`, `idleSince` and
    // `pendingCloseDeadline` are read and written only on the thread serving
    // the connection (its own while it sets up, then the loop's).

    let configuration: HTTP2Connection.Configuration
    let tuning: HTTP2Connection.Tuning
    let events: ConnectionEvents
    let handOff: ConnectionHandOff
    /// Serves the connection once it is up (with the pool's other connections).
    let loop: ConnectionLoop
    let client: ClientSession
    let io: ConnectionIO
    /// Since when no request has been on a stream or waiting, for `idleTimeout`.
    var idleSince: UInt64?
    /// The drain deadline while a close is under way, for `sleepBudget`.
    var pendingCloseDeadline: UInt64?

    init(configuration: HTTP2Connection.Configuration, observer: HTTP2EventObserver?, loop: ConnectionLoop, tuning: HTTP2Connection.Tuning) {
        self.configuration = configuration
        self.tuning = tuning
        self.loop = loop
        events = ConnectionEvents(origin: configuration.origin, observer: observer)
        handOff = ConnectionHandOff(configuration: configuration)
        client = ClientSession(configuration: configuration, handOff: handOff, events: events)
        io = ConnectionIO(origin: configuration.origin)
    }

    func start() {
        Socket.ignoreBrokenPipes
        do {
            try DetachedThread.start(name: "relay-apns-h2") { [self] in run() }
        } catch {
            // Out of threads (a pids limit): the connection fails like a
            // refused connect, here, so its callers get an error they can
            // retry and the pool backs off. (Not from a task: out of
            // threads, Dispatch waits for one to start its worker.)
            finishThread(failing: HTTP2Error(.connectFailed, "\(error) for the connection to \(configuration.origin)"))
        }
    }

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
        handOff.setState(.ready)
        events.report(.opened)
        io.lastActivity = MonotonicClock.now()
        loop.join(self)
    }

    // What `PollLoop` asks of each member around its poll() (`PollLoopMember`).

    var socket: Int32 { io.socket }

    /// Output left that the socket did not take: the loop waits for it to be writable.
    var hasOutputLeft: Bool { io.hasOutputLeft }

    /// Bytes OpenSSL holds that poll() cannot see: the loop must not sleep.
    var hasBufferedInput: Bool { io.hasBufferedInput }

    func prepareToSleep() -> Bool { handOff.prepareToSleep() }

    func awoke() { handOff.awoke() }

    func moveWakeUps(to wake: WakeSignal) { handOff.moveWakeUps(to: wake) }
}

extension ConnectionCore: PollLoopMember {
    /// The client's turns are bounded by each connection's `sleepBudget` (its tuning's longest sleep).
    static var longestPollMilliseconds: Int32 { .max }

    func turnBeforePoll(now: UInt64) -> Bool {
        do throws(HTTP2Error) {
            if try turn(now: now) { return true }
            finishThread(failing: closedNormally)
        } catch {
            finishThread(failing: error)
        }
        return false
    }

    func beforeSleep() { tuning.beforeSleep?() }

    func turnAfterPoll(_ readiness: Poll.Readiness) -> Bool {
        do throws(HTTP2Error) {
            try afterPoll(readiness)
            return true
        } catch {
            finishThread(failing: error)
            return false
        }
    }
}
