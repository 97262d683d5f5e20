import Synchronization

/// Remembers the last Live Activity `timestamp` sent to each activity token,
/// because iOS silently ignores an update or end whose timestamp is not
/// newer than the one it already applied.
final class TimestampGuard: Sendable {
    private struct State {
        var latest: [String: Int64] = [:]
        var order: [String] = []
        var head = 0
    }

    private let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// The last timestamp recorded for `key` when `timestamp` is not newer; nil when it is fine.
    func staleness(key: String, timestamp: Int64) -> Int64? {
        state.withLock { state in
            guard let last = state.latest[key], timestamp <= last else { return nil }
            return last
        }
    }

    /// Records `timestamp` as the newest sent for `key`.
    func record(key: String, timestamp: Int64) {
        state.withLock { state in
            if state.latest[key] == nil {
                state.order.append(key)
                if state.order.count - state.head > capacity {
                    state.latest[state.order[state.head]] = nil
                    state.head += 1
                    if state.head > 4096 {
                        state.order.removeFirst(state.head)
                        state.head = 0
                    }
                }
            }
            state.latest[key] = max(timestamp, state.latest[key] ?? .min)
        }
    }
}
