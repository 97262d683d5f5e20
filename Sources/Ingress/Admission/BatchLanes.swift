import Synchronization

/// Batch sends running at once across every batch
/// (`ingress.max_batch_sends_running`).
///
/// Each batch runs at most ``Ingress/Configuration/batchConcurrency`` sends
/// at a time, and all batches together at most this many, so batches cannot
/// fill the APNs connections' stream limit and queue single sends behind
/// them. A batch that finds no free lane waits in line (first come, first
/// served) and gives up after a short patience to re-check whether it should
/// stop at all (client gone, deadline, drain).
final class BatchLanes: Sendable {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var free: Int
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
    }

    let capacity: Int
    private let state: Mutex<State>

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        state = Mutex(State(free: max(1, capacity)))
    }

    /// Takes one lane if one is free and nobody waits for it.
    func tryAcquire() -> Bool {
        state.withLock { state in
            guard state.free > 0, state.waiters.isEmpty else { return false }
            state.free -= 1
            return true
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
                if state.free > 0, state.waiters.isEmpty {
                    state.free -= 1
                    return true
                }
                state.waiters.append(Waiter(id: id, continuation: continuation))
                return false
            }
            if granted {
                continuation.resume(returning: true)
                return
            }
            Task { [self] in
                try? await Task.sleep(for: patience)
                let expired = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                    guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.waiters.remove(at: index).continuation
                }
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
                    if state.free > 0, state.waiters.isEmpty {
                        state.free -= 1
                        return true
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                if let answer { continuation.resume(returning: answer) }
            }
        } onCancel: {
            let removed = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            removed?.resume(returning: false)
        }
    }

    /// Gives `count` lanes back, to the longest waiting batches first.
    func release(_ count: Int) {
        guard count > 0 else { return }
        let handed = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            let woken = min(count, state.waiters.count)
            let continuations = state.waiters.prefix(woken).map(\.continuation)
            state.waiters.removeFirst(woken)
            state.free += count - woken
            return continuations
        }
        for continuation in handed { continuation.resume(returning: true) }
    }

    /// Lanes taken now.
    var inUse: Int { state.withLock { capacity - $0.free } }
}
