import Synchronization

/// The completions of sends that run together (a batch's chunk), held until
/// ``RelayService/recordCompletions(_:)`` records them with the durable
/// observers at once: the audit journal appends them with one write (or
/// syncs them in one group) instead of one append per send.
///
/// Whoever runs sends with ``RelayService/run(_:completingWith:)`` must
/// record the completions once those sends have returned and before any
/// of their results is answered: until then the sends count as in flight
/// (a drain waits for them) and their records are not durable.
public final class SendCompletions: Sendable {
    private struct State {
        var events: [SendEvent] = []
        /// Sends run with this collection and not yet recorded.
        var runs = 0
    }

    private let state: Mutex<State>

    /// - Parameter capacity: how many sends will run with it (room reserved once).
    public init(capacity: Int = 0) {
        var state = State()
        state.events.reserveCapacity(capacity)
        self.state = Mutex(state)
    }

    func began() { state.withLock { $0.runs += 1 } }

    func append(_ event: SendEvent) { state.withLock { $0.events.append(event) } }

    /// What was collected, and how many sends ran; empties the collection.
    func take() -> (events: [SendEvent], runs: Int) {
        state.withLock { state in
            defer { state = State() }
            return (state.events, state.runs)
        }
    }
}
