import Synchronization
import RelayBasics

/// What other threads share with a ``ServerConnection``: the commands handed
/// to the thread serving it (its set-up thread, then the server's loop) and
/// whether that thread sleeps; whether the connection is finished or
/// lingering. Everything else of the connection belongs to that thread.
final class ServerHandOff: @unchecked Sendable {
    // `inbox` is a Mutex and the flags atomics: any thread may use them.

    private struct Inbox {
        var commands: [ServerConnection.Command] = []
        /// The thread is in poll() (or about to be) and saw no command: the
        /// next command signals `wake`. The same rule as the client's
        /// `ConnectionHandOff.Shared.sleeping`: while the thread is awake, a
        /// command (a handler answering at once on this thread, or any
        /// other) costs no eventfd write, since the thread looks at the
        /// inbox again before it sleeps; the flag is set and read under the
        /// one lock, so no wake-up is lost.
        var sleeping = false
        /// Whom a command wakes: the set-up thread's signal, then the loop's.
        var wake: WakeSignal
    }

    private let inbox: Mutex<Inbox>
    private let finished = Atomic<Bool>(false)
    /// Its goodbye is written: nothing more goes out.
    private let lingering = Atomic<Bool>(false)
    /// The set-up thread's wake signal (the TLS handshake's poll()).
    let setUpWake: WakeSignal

    init() {
        let wake = WakeSignal()
        setUpWake = wake
        inbox = Mutex(Inbox(wake: wake))
    }

    /// Hands `command` to the connection's thread, waking it only if it sleeps.
    func send(_ command: ServerConnection.Command) {
        let wake = inbox.withLock { inbox -> WakeSignal? in
            inbox.commands.append(command)
            defer { inbox.sleeping = false }
            return inbox.sleeping ? inbox.wake : nil
        }
        wake?.signal()
    }

    /// The commands handed over since the last call, swapped into `pending`
    /// (emptied first, its capacity kept: no allocation per turn).
    func take(into pending: inout [ServerConnection.Command]) {
        pending.removeAll(keepingCapacity: true)
        inbox.withLock { swap(&$0.commands, &pending) }
    }

    /// From now on commands wake `wake` (the loop's), not the set-up thread.
    func moveWakeUps(to wake: WakeSignal) {
        inbox.withLock { $0.wake = wake }
    }

    /// Marks the thread asleep unless a command waits: false means the
    /// loop must not sleep (the command is taken next turn).
    func prepareToSleep() -> Bool {
        inbox.withLock { inbox in
            guard inbox.commands.isEmpty else { return false }
            inbox.sleeping = true
            return true
        }
    }

    /// The loop's poll() returned: commands from now on need no signal.
    func awoke() {
        inbox.withLock { $0.sleeping = false }
    }

    var isFinished: Bool { finished.load(ordering: .relaxed) }
    func markFinished() { finished.store(true, ordering: .relaxed) }
    var isLingering: Bool { lingering.load(ordering: .relaxed) }
    func markLingering() { lingering.store(true, ordering: .relaxed) }
}
