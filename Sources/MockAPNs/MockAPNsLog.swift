import Synchronization

/// Every request the mock saw and how it answered, for test assertions.
public final class MockAPNsLog: Sendable {
    /// One request and its answer.
    public struct Entry: Sendable {
        public var request: MockRequest
        /// nil when the mock did not answer (no answer, reset, abrupt GOAWAY).
        public var status: Int?
        public var reason: String?
        public var apnsID: String?
    }

    private struct State {
        var entries: [Entry] = []
        var total = 0
        var byStatus: [Int: Int] = [:]
        var byReason: [String: Int] = [:]
    }

    private let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = capacity }

    func record(_ entry: Entry) {
        state.withLock { state in
            if state.entries.count >= capacity { state.entries.removeFirst(max(1, capacity / 10)) }
            state.entries.append(entry)
            state.total += 1
            if let status = entry.status { state.byStatus[status, default: 0] += 1 }
            if let reason = entry.reason { state.byReason[reason, default: 0] += 1 }
        }
    }

    /// The kept entries, oldest first.
    public var entries: [Entry] { state.withLock { $0.entries } }
    /// Requests seen since start (including dropped entries).
    public var total: Int { state.withLock { $0.total } }
    /// Answers by status.
    public var countsByStatus: [Int: Int] { state.withLock { $0.byStatus } }
    /// Error answers by reason.
    public var countsByReason: [String: Int] { state.withLock { $0.byReason } }

    /// The arrival number (1 for the first request since start) of the first
    /// kept request that carried `apnsID`: how many requests reached the mock
    /// before it, independent of how long anything took.
    public func arrival(apnsID: String) -> Int? {
        state.withLock { state in
            state.entries.firstIndex { $0.apnsID == apnsID }.map { state.total - state.entries.count + $0 + 1 }
        }
    }

    /// Attempts that carried `apnsID`.
    public func attempts(apnsID: String) -> [Entry] {
        state.withLock { $0.entries.filter { $0.apnsID == apnsID } }
    }
}
