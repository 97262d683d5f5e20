import RelayBasics
import Synchronization

/// The thread that serves an ``HTTP2Server``'s established connections: one
/// poll() over every connection's socket and one eventfd.
///
/// Each connection used to run on a thread of its own. Every answer a
/// handler gave from another thread then woke that connection's thread
/// (an eventfd write, then a switch into it), and two connections meant
/// two threads to wake, each finding about half as much to do per wake-up.
/// One thread serving them all takes the answers for every connection that
/// arrived while it was awake in one turn, as the APNs client's
/// ``ConnectionLoop`` does for an origin's connections. Each connection
/// still sets up (the TLS handshake, with its deadline) on a thread of its
/// own, so a slow handshake never stalls the others; once up it joins the
/// loop, and that thread runs the loop if no thread does yet, or ends.
///
/// Handlers run on this thread, so they must not block (as
/// ``HTTP2ServerHandler`` says). The loop serves the connections in turn,
/// one read of each per turn: a client sending without pause gets its
/// share, not the thread.
///
/// The needs-wake-up protocol holds per connection: before it sleeps the
/// loop marks each connection asleep under that connection's lock after
/// finding its commands empty, so a command to any connection either is
/// seen or signals the loop's eventfd.
final class ServerLoop: @unchecked Sendable {
    // Thread discipline: `state` is synchronized; `members`, `pollSet` and
    // `marked` belong to the thread running the loop (handed from one
    // runner to the next under `state`'s lock).
    private struct State {
        var joining: [ServerConnection] = []
        var running = false
    }

    private let state = Mutex(State())
    let wake = WakeSignal()
    private var members: [ServerConnection] = []
    private var pollSet = Poll.Set()
    private var marked: [Bool] = []

    /// Adds a connection that is up. Runs the loop on the calling thread
    /// until it has no connections left, unless another thread runs it.
    func join(_ connection: ServerConnection) {
        connection.moveWakeUps(to: wake)
        let runHere = state.withLock { state -> Bool in
            state.joining.append(connection)
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
            let joined = state.withLock { state -> [ServerConnection]? in
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

    /// One turn: each connection's commands and output, one poll(), each
    /// connection's reads.
    private func turn() {
        let now = MonotonicClock.now()
        keepMembers { member, _ in
            if member.turn(now: now) { return true }
            member.finish()
            return false
        }
        guard !members.isEmpty else { return }

        pollSet.reset(wake: wake)
        // A second's turn at most: the request time limit is checked each turn.
        var timeout = ServerConnection.longestSleep
        var mustNotSleep = false
        for member in members {
            timeout = min(timeout, member.sleepBudget(now: now))
            mustNotSleep = mustNotSleep || member.hasBufferedInput
            pollSet.add(socket: member.socket, write: member.hasOutputLeft)
        }
        marked.removeAll(keepingCapacity: true)
        if !mustNotSleep {
            // A command that came during this turn is taken at once: poll() only looks.
            for member in members {
                let asleep = member.prepareToSleep()
                marked.append(asleep)
                if !asleep { mustNotSleep = true }
            }
        }
        pollSet.wait(wake: wake, milliseconds: mustNotSleep ? 0 : Poll.milliseconds(fromNanoseconds: timeout))
        for (index, asleep) in marked.enumerated() where asleep { members[index].awoke() }

        keepMembers { member, index in
            if member.afterPoll(pollSet.readiness(ofSocket: index)) { return true }
            member.finish()
            return false
        }
    }

    /// Keeps the members for which `body` (called once each, in order,
    /// with the member's position in the turn) says true, in order.
    private func keepMembers(_ body: (ServerConnection, Int) -> Bool) {
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
