import Synchronization

/// Batch sends running at once across every batch
/// (`ingress.max_batch_sends_running`).
///
/// Each batch runs at most ``Ingress/Configuration/batchConcurrency`` sends
/// at a time, and all batches together at most this many, so batches cannot
/// fill the APNs connections' stream limit and queue single sends behind
/// them. A batch that wants another worker and finds no free lane waits in
/// line (first come, first served) and gives up after a short patience to
/// re-check whether it should stop at all (client gone, deadline, drain); a
/// batch's worker between two sends waits in a second line, served after
/// the batches, until a lane comes or the batch's deadline cancels it.
final class BatchLanes: Sendable {
    /// Who waits for a lane, first come, first served. Thousands may wait
    /// (every worker of every batch between two sends), so handing a lane
    /// over and leaving the line are O(1): the line is a list of ids read
    /// from a moving head, and a waiter that left is only dropped from the
    /// table; its id is skipped when the head reaches it.
    private struct Waiters {
        private var order: [UInt64] = []
        private var head = 0
        private var table: [UInt64: CheckedContinuation<Bool, Never>] = [:]

        var isEmpty: Bool { table.isEmpty }
        var count: Int { table.count }

        mutating func append(_ id: UInt64, _ continuation: CheckedContinuation<Bool, Never>) {
            order.append(id)
            table[id] = continuation
        }

        /// The longest waiting one, out of the line.
        mutating func popFirst() -> CheckedContinuation<Bool, Never>? {
            while head < order.count {
                let id = order[head]
                head += 1
                if let continuation = table.removeValue(forKey: id) {
                    compact()
                    return continuation
                }
            }
            compact()
            return nil
        }

        /// `id` out of the line, if it is still in it.
        mutating func remove(_ id: UInt64) -> CheckedContinuation<Bool, Never>? {
            table.removeValue(forKey: id)
        }

        private mutating func compact() {
            if head == order.count {
                order.removeAll(keepingCapacity: true)
                head = 0
            } else if head > 1024, head * 2 > order.count {
                order.removeFirst(head)
                head = 0
            }
        }
    }

    private struct State {
        var free: Int
        /// Batches with no send running, waiting to start one (``acquire(patience:)``).
        var waiters = Waiters()
        /// Workers of running batches waiting for their next lane
        /// (``acquireUnlessCancelled()``): served after every waiting batch,
        /// so a batch that has nothing running gets the next free lane
        /// however many workers of other batches wait. (In one line, a
        /// waiting batch went to the back each time its patience ran out,
        /// behind workers that never leave it, and starved until its deadline.)
        var workers = Waiters()
        var nextID: UInt64 = 0

        var nobodyWaits: Bool { waiters.isEmpty && workers.isEmpty }
    }

    let capacity: Int
    private let state: Mutex<State>

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        state = Mutex(State(free: max(1, capacity)))
    }

    /// Takes one lane if one is free and nobody waits for it.
    func tryAcquire() -> Bool { tryAcquire(upTo: 1) == 1 }

    /// Takes up to `count` lanes, as many as are free, if nobody waits for
    /// one; returns how many (a batch's worker filling its chunk in one step).
    func tryAcquire(upTo count: Int) -> Int {
        guard count > 0 else { return 0 }
        return state.withLock { state in
            guard state.nobodyWaits else { return 0 }
            let taken = min(count, state.free)
            state.free -= taken
            return taken
        }
    }

    /// Waits up to `patience` for a lane; false when none came in time.
    func acquire(patience: Duration) async -> Bool {
        if tryAcquire() { return true }
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let granted = state.withLock { state in
                if state.free > 0, state.nobodyWaits {
                    state.free -= 1
                    return true
                }
                state.waiters.append(id, continuation)
                return false
            }
            if granted {
                continuation.resume(returning: true)
                return
            }
            Task { [self] in
                try? await Task.sleep(for: patience)
                let expired = state.withLock { $0.waiters.remove(id) }
                expired?.resume(returning: false)
            }
        }
    }

    /// Waits in line for a lane, without a patience: true once one is
    /// handed over, false when the task is cancelled first. For a batch's
    /// worker between two sends: it needs no timer, since a lane comes back
    /// as soon as any running send ends, and the batch's deadline cancels it.
    func acquireUnlessCancelled() async -> Bool {
        if tryAcquire() { return true }
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                // Checked under the lock the cancellation handler takes too: a
                // cancellation either sees this waiter or is seen here.
                let answer = state.withLock { state -> Bool? in
                    if Task.isCancelled { return false }
                    if state.free > 0, state.nobodyWaits {
                        state.free -= 1
                        return true
                    }
                    state.workers.append(id, continuation)
                    return nil
                }
                if let answer { continuation.resume(returning: answer) }
            }
        } onCancel: {
            let removed = state.withLock { $0.workers.remove(id) }
            removed?.resume(returning: false)
        }
    }

    /// Gives `count` lanes back: to the longest waiting batches first, then to waiting workers.
    func release(_ count: Int) {
        guard count > 0 else { return }
        let handed = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            var continuations: [CheckedContinuation<Bool, Never>] = []
            while continuations.count < count, let next = state.waiters.popFirst() ?? state.workers.popFirst() { continuations.append(next) }
            state.free += count - continuations.count
            return continuations
        }
        for continuation in handed { continuation.resume(returning: true) }
    }

    /// Batches and workers waiting in line now.
    var waiting: Int { state.withLock { $0.waiters.count + $0.workers.count } }

    /// Lanes taken now.
    var inUse: Int { state.withLock { capacity - $0.free } }
}
