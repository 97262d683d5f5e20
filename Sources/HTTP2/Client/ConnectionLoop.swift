import Synchronization

/// The thread that serves established connections: one poll() over every
/// member's socket and one eventfd. It is also a `TaskExecutor`, so the
/// code that waits on its requests can run on it.
///
/// A connection has a loop of its own, or shares one: its pool's
/// (`HTTP2Pool.Configuration.sharesOneThread`) or one handed to the pool
/// (`HTTP2Pool.init(configuration:observer:loop:)`, which the relay's
/// transport does for all its origins). Measured on the relay (single sends,
/// 8 client connections), a thread per connection split the work so that
/// each thread found about half as much to do per wake-up: more poll()
/// turns, sleeps and wake-ups per send than one thread serving both
/// connections. Each connection still sets up (connect, TLS handshake, with
/// their own deadlines) on a thread of its own, so a slow handshake never
/// stalls the others; once up it joins the loop, and that thread runs the
/// loop if no thread does yet, or ends.
///
/// The needs-wake-up protocol (`ConnectionCore.Shared.sleeping`) holds per
/// member: before it sleeps the loop marks each member asleep under that
/// member's lock after finding its hand-over queue empty, so a sender to any
/// member either is seen or signals the loop's eventfd. Jobs follow the same
/// rule under the loop's own lock (`State.asleep`).
///
/// As an executor: a task that prefers the loop
/// (`Task(executorPreference:)`) runs its jobs on the loop's thread,
/// between turns, so a request it sends is queued without a wake-up and the
/// answer that resumes it needs no other thread: the send's round trip stays
/// on one thread. Jobs run only while the loop runs (it has connections);
/// otherwise, and when the loop ends with jobs left, they go to the global
/// concurrent executor, which a preference allows. A job must never block:
/// every connection of the loop waits while it runs.
public final class ConnectionLoop: TaskExecutor, @unchecked Sendable {
    // Thread discipline: `state` is synchronized; `members`, `pollSet`,
    // `marked` and `running` belong to the thread running the loop (handed
    // from one runner to the next under `state`'s lock).
    private struct State {
        var joining: [ConnectionCore] = []
        var running = false
        /// Jobs of tasks that prefer this loop, in arrival order.
        var jobs: [UnownedJob] = []
        /// The loop sleeps (or is about to) in poll() having seen no jobs:
        /// the next job signals `wake`.
        var asleep = false
    }

    private let state = Mutex(State())
    let wake = WakeSignal()
    private var members: [ConnectionCore] = []
    private var pollSet = Poll.Set()
    private var marked: [Bool] = []
    /// This turn's jobs (swapped out of `State.jobs`; capacity kept).
    private var jobsNow: [UnownedJob] = []

    /// A loop no thread runs until a connection joins.
    public init() {}

    /// Queues `job` to run on the loop's thread, waking it if it sleeps;
    /// with no loop running, hands it to the global concurrent executor.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        enum Route { case queued, wake, elsewhere }
        let route = state.withLock { state -> Route in
            guard state.running else { return .elsewhere }
            state.jobs.append(job)
            guard state.asleep else { return .queued }
            state.asleep = false
            return .wake
        }
        switch route {
        case .queued: break
        case .wake: wake.signal()
        case .elsewhere: globalConcurrentExecutor.enqueue(ExecutorJob(job))
        }
    }

    /// Whether the loop is marked asleep for jobs (the next job signals
    /// the eventfd): tests wait for it to hand a job over at that moment.
    var sleepsWithoutJobs: Bool { state.withLock { $0.asleep } }

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
            // runs the loop itself, and a job arriving after that goes to
            // the global executor, as do the jobs left here.
            let joined = state.withLock { state -> [ConnectionCore]? in
                swap(&state.jobs, &jobsNow)
                if state.joining.isEmpty, members.isEmpty {
                    state.running = false
                    return nil
                }
                defer { state.joining.removeAll() }
                return state.joining
            }
            guard let joined else {
                for job in jobsNow { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
                jobsNow.removeAll()
                return
            }
            members.append(contentsOf: joined)
            runJobs()
            turn()
        }
    }

    /// Runs the jobs taken this turn, in order. Their sends reach the
    /// members' queues before the turn writes them out.
    private func runJobs() {
        guard !jobsNow.isEmpty else { return }
        let executor = asUnownedTaskExecutor()
        for job in jobsNow { job.runSynchronously(on: executor) }
        jobsNow.removeAll(keepingCapacity: true)
    }

    /// One turn: each member's work, one poll(), each member's reads.
    private func turn() {
        let now = Clock.now()
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
        var markedForJobs = false
        if !mustNotSleep {
            // Jobs first: a job that arrived during the turn keeps the
            // loop awake; after this, any job signals the eventfd.
            mustNotSleep = state.withLock { state in
                if !state.jobs.isEmpty { return true }
                state.asleep = true
                return false
            }
            markedForJobs = !mustNotSleep
        }
        if !mustNotSleep {
            for member in members {
                let asleep = member.prepareToSleep()
                marked.append(asleep)
                if !asleep { mustNotSleep = true }
            }
        }
        pollSet.wait(wake: wake, milliseconds: mustNotSleep ? 0 : Poll.milliseconds(fromNanoseconds: timeout, cap: .max))
        for (index, asleep) in marked.enumerated() where asleep { members[index].awoke() }
        if markedForJobs { state.withLock { $0.asleep = false } }

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
