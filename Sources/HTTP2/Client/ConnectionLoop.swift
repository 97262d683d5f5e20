import RelayBasics
import Synchronization

/// The thread that serves established connections: one poll() over every
/// member's socket and one eventfd.
///
/// A connection has a loop of its own, or shares its pool's
/// (`HTTP2Pool.Configuration.sharesOneThread`, which the relay's transport
/// sets). Measured on the relay (single sends, 8 client connections), a
/// thread per connection split the work so that each thread found about
/// half as much to do per wake-up: more poll() turns, sleeps and wake-ups
/// per send than one thread serving both connections. Each connection
/// still sets up (connect, TLS handshake, with their own deadlines) on a
/// thread of its own, so a slow handshake never stalls the others; once up
/// it joins the loop, and that thread runs the loop if no thread does yet,
/// or ends.
///
/// The needs-wake-up protocol (`ConnectionHandOff.Shared.sleeping`) holds per
/// member: before it sleeps the loop marks each member asleep under that
/// member's lock after finding its hand-over queue empty, so a sender to any
/// member either is seen or signals the loop's eventfd.
final class ConnectionLoop: @unchecked Sendable {
    // Thread discipline: `state` is synchronized; `members`, `pollSet` and
    // `marked` belong to the thread running the loop (handed from one
    // runner to the next under `state`'s lock).
    private struct State {
        var joining: [ConnectionCore] = []
        var running = false
    }

    private let state = Mutex(State())
    let wake = WakeSignal()
    private var members: [ConnectionCore] = []
    private var pollSet = Poll.Set()
    private var marked: [Bool] = []

    /// Adds a connection that is up. Runs the loop on the calling thread
    /// until it has no connections left, unless another thread runs it.
    func join(_ core: ConnectionCore) {
        core.moveWakeUps(to: wake)
        let runHere = state.withLock { state -> Bool in
            state.joining.append(core)
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
            let joined = state.withLock { state -> [ConnectionCore]? in
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
        keepMembers { member in
            do throws(HTTP2Error) {
                if try member.turn(now: now) { return true }
                member.finishThread(failing: member.closedNormally)
            } catch {
                member.finishThread(failing: error)
            }
            return false
        }
        guard !members.isEmpty else { return }

        pollSet.reset(wake: wake)
        var timeout = UInt64.max
        var mustNotSleep = false
        for member in members {
            timeout = min(timeout, member.sleepBudget(now: now))
            mustNotSleep = mustNotSleep || member.hasBufferedInput
            pollSet.add(socket: member.socket, write: member.hasOutputLeft)
            member.tuning.beforeSleep?()
        }
        marked.removeAll(keepingCapacity: true)
        if !mustNotSleep {
            for member in members {
                let asleep = member.prepareToSleep()
                marked.append(asleep)
                if !asleep { mustNotSleep = true }
            }
        }
        pollSet.wait(wake: wake, milliseconds: mustNotSleep ? 0 : Poll.milliseconds(fromNanoseconds: timeout, cap: .max))
        for (index, asleep) in marked.enumerated() where asleep { members[index].awoke() }

        keepMembers { member, index in
            do throws(HTTP2Error) {
                try member.afterPoll(pollSet.readiness(ofSocket: index))
                return true
            } catch {
                member.finishThread(failing: error)
                return false
            }
        }
    }

    /// Keeps the members for which `body` (called once each, in order,
    /// with the member's position in the turn) says true, in order.
    private func keepMembers(_ body: (ConnectionCore, Int) -> Bool) {
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

    private func keepMembers(_ body: (ConnectionCore) -> Bool) {
        keepMembers { member, _ in body(member) }
    }
}
