import Glibc
public import RelayBasics
import Synchronization

/// A ``DetachedThread/Starter`` that refuses with EAGAIN, as `pthread_create`
/// does at a pids limit, until a test lets it start threads; it counts what
/// it was asked.
///
/// A part that starts a thread as it runs (the log drain, the batch
/// deadlines' watcher) must keep its work and try again when the system
/// gives none: with this, a test checks that without lowering the process's
/// own limits.
public final class RefusingThreadStarter: Sendable {
    private let allowed = Atomic<Bool>(false)
    private let refusedCount = Atomic<Int>(0)
    private let startedCount = Atomic<Int>(0)

    public init() {}

    /// Starts threads from now on (the system has threads again).
    public func allow() { allowed.store(true, ordering: .sequentiallyConsistent) }

    /// Starts refused so far.
    public var refused: Int { refusedCount.load(ordering: .sequentiallyConsistent) }
    /// Threads started so far.
    public var started: Int { startedCount.load(ordering: .sequentiallyConsistent) }

    /// The starter to hand to the part under test.
    public var starter: DetachedThread.Starter {
        { [self] name, body throws(DetachedThread.StartFailure) in
            guard allowed.load(ordering: .sequentiallyConsistent) else {
                refusedCount.add(1, ordering: .sequentiallyConsistent)
                throw DetachedThread.StartFailure(code: EAGAIN)
            }
            try DetachedThread.start(name: name, body)
            startedCount.add(1, ordering: .sequentiallyConsistent)
        }
    }
}
