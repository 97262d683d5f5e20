import RelayBasics
import Foundation

/// The deadlines of every running batch (`ingress.batch_deadline_seconds`),
/// watched by one thread instead of one timer per batch.
///
/// A batch used to start a child task sleeping until its deadline: one
/// Dispatch timer per batch that stayed armed for the whole deadline even
/// after the batch ended (the sleep was cancelled, the timer was not), so a
/// relay answering thousands of small batches a second kept tens of
/// thousands of timers. Here a batch registers an action (cancel its task)
/// and its deadline, and deregisters when it ends; the thread sleeps until
/// the earliest deadline still registered and runs the action of each one
/// that passes. Deadlines arrive nearly in order (each is its batch's start
/// plus the same setting), so the thread wakes about once per deadline that
/// actually passes or per batch that outlives the one before it, not once
/// per batch; entries of batches that ended are dropped lazily.
final class BatchDeadlines: @unchecked Sendable {
    // Everything below is guarded by `condition`.
    /// Monotonic: a wall-clock wait stepped back stretched by the whole step.
    private let condition = MonotonicCondition()
    /// Min-heap of (deadline, id), possibly holding ids already deregistered.
    private var heap: [(deadline: ContinuousClock.Instant, id: UInt64)] = []
    private var actions: [UInt64: @Sendable () -> Void] = [:]
    private var nextID: UInt64 = 0
    private var threadRunning = false
    /// How long an idle thread waits for a registration before it exits.
    private let idleLinger: Double

    /// How the watcher's thread is started (``DetachedThread/start(name:_:)``; a test's may fail).
    private let startThreadWith: DetachedThread.Starter

    init(idleLinger: Double = 5, startingThreadsWith starter: @escaping DetachedThread.Starter = DetachedThread.start) {
        self.idleLinger = idleLinger
        startThreadWith = starter
    }

    /// Runs `action` on the watcher's thread once `deadline` passes, unless
    /// ``deregister(_:)`` came first. The action runs under the watcher's
    /// lock: it must be short and must not call back into this type.
    func register(_ deadline: ContinuousClock.Instant, action: @escaping @Sendable () -> Void) -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        nextID += 1
        let id = nextID
        actions[id] = action
        push((deadline, id))
        // Stale entries (batches that ended) are kept until they surface;
        // rebuild when they outnumber the live ones.
        if heap.count > 1024, heap.count > 2 * actions.count {
            heap = heap.filter { actions[$0.id] != nil }
            heapify()
        }
        if !threadRunning {
            // Out of threads (a pids limit), the watcher is not marked
            // running: the next registration tries again, and its thread
            // watches every deadline registered meanwhile, this one too.
            threadRunning = (try? startThreadWith("relay-deadlines") { [self] in run() }) != nil
            // Until then this deadline is kept by a task that sleeps on the
            // pool's own threads (it needs no new one): without it a batch
            // with no batch after it ran past its deadline, to its sends' own.
            if !threadRunning { watchWithoutThread(id, until: deadline) }
        } else if heap[0].id == id {
            // Earlier than what the thread sleeps until.
            condition.signal()
        }
        return id
    }

    /// Runs the action of `id` at `deadline` from a sleeping task, unless it
    /// was deregistered or a watcher thread started since ran it first: the
    /// action is taken out under the lock, so it runs once either way.
    private func watchWithoutThread(_ id: UInt64, until deadline: ContinuousClock.Instant) {
        Task { [self] in
            try? await Task.sleep(until: deadline, clock: .continuous)
            condition.lock()
            let action = actions.removeValue(forKey: id)
            action?()
            condition.unlock()
        }
    }

    /// Forgets a batch's deadline. Once this returns its action has run or never will.
    func deregister(_ id: UInt64) {
        condition.lock()
        actions[id] = nil
        condition.unlock()
    }

    private func run() {
        condition.lock()
        defer { condition.unlock() }
        while true {
            // Drop what surfaced of batches that ended.
            while let top = heap.first, actions[top.id] == nil { pop() }
            guard let top = heap.first else {
                if !condition.wait(until: MonotonicClock.now() + MonotonicClock.nanoseconds(idleLinger)), heap.isEmpty {
                    threadRunning = false
                    return
                }
                continue
            }
            let now = ContinuousClock.now
            if top.deadline <= now {
                pop()
                actions.removeValue(forKey: top.id)?()
                continue
            }
            // On the monotonic clock: NSCondition's wall-clock wait, even
            // one of a second, lasted a whole step of the clock longer
            // (the kernel measures its deadline on the stepped clock).
            condition.wait(until: MonotonicClock.now() + MonotonicClock.nanoseconds((top.deadline - now).seconds))
        }
    }

    private func push(_ entry: (deadline: ContinuousClock.Instant, id: UInt64)) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private func pop() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        siftDown(0)
    }

    private func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count, heap[right].deadline < heap[smallest].deadline { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }

    private func heapify() {
        guard heap.count > 1 else { return }
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }
}
