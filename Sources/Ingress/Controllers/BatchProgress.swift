import Relay
import Synchronization

/// What a finished batch run gives the route to answer with.
struct BatchRun {
    /// Each result's encoded JSON, in request order.
    var entries: [[UInt8]]
    var succeeded = 0
    var notSent = 0
    /// The answers of keyed items that were sent or replayed, by item.
    var answers: [Int: IdempotentAnswer] = [:]
    var stop: BatchStop?
}

/// One running batch, shared by its coordinator and its workers: the
/// next send to start, why the batch stopped starting sends, and the
/// results so far. Every change is one short critical section; nothing
/// awaits under the lock.
final class BatchProgress: Sendable {
    private struct State {
        /// Index into ``sendPositions`` of the next send to start.
        var next = 0
        var run: BatchRun
        /// Sends finished or answered NotSent: their budget is given back.
        var settled = 0
    }

    let plan: BatchPlan
    /// The plan's positions that are sends (not refused items), in order.
    let sendPositions: [Int32]
    private let state: Mutex<State>

    init(plan: BatchPlan) {
        self.plan = plan
        sendPositions = plan.sendPositions
        state = Mutex(State(run: BatchRun(entries: [[UInt8]](repeating: [], count: plan.count))))
    }

    /// The positions of the next sends to start, at most `count` of
    /// them (a worker's chunk); empty once every send has started or the
    /// batch stopped.
    func claim(upTo count: Int) -> [Int] {
        state.withLock { state in
            guard state.run.stop == nil, state.next < sendPositions.count else { return [] }
            let end = min(sendPositions.count, state.next + count)
            defer { state.next = end }
            return sendPositions[state.next..<end].map { Int($0) }
        }
    }

    /// Whether sends remain to start (false once the batch stopped).
    var hasMore: Bool { state.withLock { $0.run.stop == nil && $0.next < sendPositions.count } }

    var isStopped: Bool { state.withLock { $0.run.stop != nil } }

    /// Records the result of a send that ran.
    func finish(position: Int, entry: [UInt8], ok: Bool, answer: IdempotentAnswer?) {
        state.withLock { state in
            state.run.entries[position] = entry
            if ok { state.run.succeeded += 1 }
            if let answer { state.run.answers[Int(plan.sends[position].item)] = answer }
            state.settled += 1
        }
    }

    /// Writes the answer of a position that never runs (a refused item).
    func answer(position: Int, entry: [UInt8]) {
        state.withLock { $0.run.entries[position] = entry }
    }

    /// Stops starting sends (the first reason wins) and answers every
    /// send not started yet NotSent; returns how many, whose budget the
    /// caller gives back.
    func stop(_ reason: BatchStop) -> Int {
        guard let unstarted = state.withLock({ state -> ArraySlice<Int32>? in
            guard state.run.stop == nil else { return nil }
            state.run.stop = reason
            defer { state.next = sendPositions.count }
            return sendPositions[state.next...]
        }) else { return 0 }
        // Encoded outside the lock: the workers' results need not wait for these.
        let entries = unstarted.map { position -> [UInt8] in
            var error = IngressError(status: 503, type: .notSent, message: reason.message)
            error.reason = reason.rawValue
            let send = plan.sends[Int(position)]
            return SendAnswers.batchEntry(item: Int(send.item), tokenIndex: plan.tokenIndex(of: Int(position)), result: .failure(error))
        }
        state.withLock { state in
            for (position, entry) in zip(unstarted, entries) { state.run.entries[Int(position)] = entry }
            state.run.notSent += entries.count
            state.settled += entries.count
        }
        return entries.count
    }

    /// Sends whose budget is still held: admitted, not finished, not answered NotSent.
    var unsettled: Int { state.withLock { sendPositions.count - $0.settled } }

    /// The results; called once every worker has ended.
    func result() -> BatchRun { state.withLock { $0.run } }
}
