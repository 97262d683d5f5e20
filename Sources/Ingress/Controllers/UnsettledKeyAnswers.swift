import Logging
import Relay
import Synchronization

/// Answers of keyed sends the idempotency store could not record (Postgres
/// away when the send was answered): held here, given back to a repeat of
/// the key on this relay, and recorded in the store again and again until
/// it takes them.
///
/// Without it the key stayed `in_flight` in the store; once its lease ran
/// out a repeat claimed it over and the same push went to the device a
/// second time. A repeat that reaches this relay is answered from here
/// whatever the lease says; the store gets the answer as soon as it answers
/// (before a lease that started with the claim is likely to end).
final class UnsettledKeyAnswers: Sendable {
    struct Entry: Sendable {
        var claim: IdempotencyClaim
        var answer: IdempotentAnswer
    }

    /// Entries held at most: past it the oldest is dropped (logged), the
    /// store's lease then decides, as before.
    static let limit = 100_000

    private let entries = Mutex<(byKey: [String: Entry], order: [String], retrying: Bool)>(([:], [], false))
    /// The task recording held answers, while one runs; nil once stopped.
    private let recorder = Mutex<(task: Task<Void, Never>?, stopped: Bool)>((nil, false))

    /// The answer held for the key `claim` names (its caller's hash), if any.
    func answer(for claim: IdempotencyClaim) -> Entry? {
        entries.withLock { $0.byKey[claim.keyHash] }
    }

    var count: Int { entries.withLock { $0.byKey.count } }

    /// Holds `answer` and makes sure a task records it in `store`.
    func hold(_ claim: IdempotencyClaim, _ answer: IdempotentAnswer, store: any IdempotencyStore, logger: Logger) {
        let start: Bool = entries.withLock { state in
            if state.byKey.updateValue(Entry(claim: claim, answer: answer), forKey: claim.keyHash) == nil {
                state.order.append(claim.keyHash)
            }
            if state.order.count > Self.limit {
                let oldest = state.order.removeFirst()
                state.byKey[oldest] = nil
                logger.error("too many idempotency answers waiting for the store; the oldest is left to its lease", metadata: ["limit": "\(Self.limit)"])
            }
            defer { state.retrying = true }
            return !state.retrying
        }
        guard start else { return }
        recorder.withLock { state in
            guard !state.stopped else { return }
            state.task = Task { await self.retry(store: store, logger: logger) }
        }
    }

    /// Stops recording at drain. Answers still held are not lost to a
    /// repeat: their sends' audit rows are durable (journal, spool or
    /// table), and a repeat after the lease is answered from the row
    /// (``IdempotencyVerdict/recovered(_:)``). Returns how many were held.
    @discardableResult
    func stop() -> Int {
        let task = recorder.withLock { state in
            state.stopped = true
            defer { state.task = nil }
            return state.task
        }
        task?.cancel()
        return count
    }

    /// Records every held answer in the store, waiting longer after each
    /// round that left some (0.2 s up to 5 s), until none is left.
    private func retry(store: any IdempotencyStore, logger: Logger) async {
        var delay = 0.2
        while true {
            try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
            if Task.isCancelled { return }
            let pending = entries.withLock { state in state.order.compactMap { state.byKey[$0] } }
            var recorded: [String] = []
            for entry in pending {
                do {
                    try await store.complete(entry.claim, answer: entry.answer)
                    recorded.append(entry.claim.keyHash)
                } catch {
                    break
                }
            }
            let done: Bool = entries.withLock { state in
                for key in recorded { state.byKey[key] = nil }
                state.order.removeAll { state.byKey[$0] == nil }
                if state.byKey.isEmpty { state.retrying = false }
                return state.byKey.isEmpty
            }
            if !recorded.isEmpty {
                logger.notice("idempotency answers recorded in the store after it came back", metadata: ["keys": "\(recorded.count)"])
            }
            if done { return }
            delay = recorded.isEmpty ? min(delay * 2, 5) : 0.2
        }
    }
}
