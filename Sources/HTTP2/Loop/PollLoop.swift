import RelayBasics
import Synchronization

/// What ``PollLoop`` asks of each connection it serves, around its poll().
///
/// Both ends of the HTTP/2 code are served this way: the APNs client's
/// connections (``ConnectionCore``, as ``ConnectionLoop``) and an
/// ``HTTP2Server``'s established connections (``ServerConnection``, as
/// ``ServerLoop``). The loop is written once; each side says here what a
/// turn, a sleep and a wake-up mean for its connections.
protocol PollLoopMember: AnyObject, Sendable {
    /// The longest poll() of a turn, in milliseconds, whatever the members' budgets.
    static var longestPollMilliseconds: Int32 { get }
    /// From now on hand-overs to this connection signal `wake` (the loop's),
    /// not the thread that set it up.
    func moveWakeUps(to wake: WakeSignal)
    /// The part of a turn before poll(): hand-overs taken, output written.
    /// False when the connection is done; it has then been finished.
    func turnBeforePoll(now: UInt64) -> Bool
    /// Nanoseconds the loop may sleep for this connection.
    func sleepBudget(now: UInt64) -> UInt64
    /// Bytes already read and decrypted that poll() cannot see: no sleep this turn.
    var hasBufferedInput: Bool { get }
    /// The socket poll() watches.
    var socket: Int32 { get }
    /// Output the socket did not take yet: poll() watches for writability too.
    var hasOutputLeft: Bool { get }
    /// Called just before the loop sleeps (a test's hook on the client).
    func beforeSleep()
    /// Marks the connection asleep unless a hand-over waits: false means the
    /// loop must not sleep (the hand-over is taken next turn).
    func prepareToSleep() -> Bool
    /// Called when poll() returns for a connection marked asleep.
    func awoke()
    /// The part of a turn after poll(): what the socket has, read.
    /// False when the connection is done; it has then been finished.
    func turnAfterPoll(_ readiness: Poll.Readiness) -> Bool
}

/// The APNs client's loop: one per origin in the relay.
typealias ConnectionLoop = PollLoop<ConnectionCore>
/// An ``HTTP2Server``'s loop: one per listener.
typealias ServerLoop = PollLoop<ServerConnection>

/// The thread that serves established connections: one poll() over every
/// member's socket and one eventfd.
///
/// Why one thread for many connections: measured on the relay, a thread per
/// connection split the work so that each thread found about half as much
/// to do per wake-up: more poll() turns, sleeps and wake-ups per send (on
/// the client, single sends over 8 connections; on the APNs-compatible
/// ingress, an answer from a handler woke its connection's own thread, an
/// eventfd write and a switch into it, for every answer). One thread takes
/// everything that arrived for any member while it was awake in one turn.
/// A client connection shares its pool's loop
/// (`HTTP2Pool.Configuration.sharesOneThread`, which the relay's transport
/// sets) or has one of its own; a server's connections share the server's.
/// Each connection still sets up (connect, TLS handshake, with their own
/// deadlines) on a thread of its own, so a slow handshake never stalls the
/// others; once up it joins the loop, and that thread runs the loop if no
/// thread does yet, or ends.
///
/// The members are served in turn, one read of each per turn: a peer
/// sending without pause gets its share, not the thread. Whatever runs on
/// this thread (a server's handlers) must not block.
///
/// The needs-wake-up protocol (`ConnectionHandOff.Shared.sleeping` on the
/// client, the inbox's `sleeping` on the server) holds per member: before
/// it sleeps the loop marks each member asleep under that member's lock
/// after finding its hand-overs empty, so a sender to any member either is
/// seen or signals the loop's eventfd.
final class PollLoop<Member: PollLoopMember>: @unchecked Sendable {
    // Thread discipline: `state` is synchronized; `members`, `pollSet` and
    // `marked` belong to the thread running the loop (handed from one
    // runner to the next under `state`'s lock).
    private struct State {
        var joining: [Member] = []
        var running = false
    }

    private let state = Mutex(State())
    let wake = WakeSignal()
    private var members: [Member] = []
    private var pollSet = Poll.Set()
    private var marked: [Bool] = []

    init() {}

    /// Adds a connection that is up. Runs the loop on the calling thread
    /// until it has no connections left, unless another thread runs it.
    func join(_ member: Member) {
        member.moveWakeUps(to: wake)
        let runHere = state.withLock { state -> Bool in
            state.joining.append(member)
            if state.running { return false }
            state.running = true
            return true
        }
        if runHere { run() } else { wake.signal() }
    }

    private func run() {
        while true {
            // The loop ends, under the lock a joiner takes, only with no
            // member and nobody joining: a connection joining after that
            // runs the loop itself.
            let joined = state.withLock { state -> [Member]? in
                if state.joining.isEmpty, members.isEmpty {
                    state.running = false
                    return nil
                }
                defer { state.joining.removeAll() }
                return state.joining
            }
            guard let joined else { return }
            members.append(contentsOf: joined)
            turn()
        }
    }

    /// One turn: each member's work, one poll(), each member's reads.
    private func turn() {
        let now = MonotonicClock.now()
        keepMembers { member, _ in member.turnBeforePoll(now: now) }
        guard !members.isEmpty else { return }

        pollSet.reset(wake: wake)
        var timeout = UInt64.max
        var mustNotSleep = false
        for member in members {
            timeout = min(timeout, member.sleepBudget(now: now))
            mustNotSleep = mustNotSleep || member.hasBufferedInput
            pollSet.add(socket: member.socket, write: member.hasOutputLeft)
            member.beforeSleep()
        }
        marked.removeAll(keepingCapacity: true)
        if !mustNotSleep {
            // A hand-over that came during this turn is taken at once: poll() only looks.
            for member in members {
                let asleep = member.prepareToSleep()
                marked.append(asleep)
                if !asleep { mustNotSleep = true }
            }
        }
        let milliseconds = Poll.milliseconds(fromNanoseconds: timeout, cap: Member.longestPollMilliseconds)
        pollSet.wait(wake: wake, milliseconds: mustNotSleep ? 0 : milliseconds)
        for (index, asleep) in marked.enumerated() where asleep { members[index].awoke() }

        keepMembers { member, index in member.turnAfterPoll(pollSet.readiness(ofSocket: index)) }
    }

    /// Keeps the members for which `body` (called once each, in order,
    /// with the member's position in the turn) says true, in order.
    private func keepMembers(_ body: (Member, Int) -> Bool) {
        var kept = 0
        for index in members.indices {
            let member = members[index]
            if body(member, index) {
                members[kept] = member
                kept += 1
            }
        }
        members.removeLast(members.count - kept)
    }
}
