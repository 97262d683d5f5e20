/// A server connection's answers not yet submitted: each due at a
/// ``MonotonicClock`` instant (0: the next turn; later: a mock's delay).
/// Belongs to the connection's thread. Every answer goes through here, so
/// `nextDue` always knows of it: most turns have nothing delayed to look at.
struct ScheduledAnswers {
    private var items: [(due: UInt64, stream: Int32, response: HTTP2Response)] = []
    /// The earliest `due`, nil when there is none.
    private(set) var nextDue: UInt64?

    var isEmpty: Bool { items.isEmpty }

    mutating func add(due: UInt64, stream: Int32, response: HTTP2Response) {
        items.append((due, stream, response))
        nextDue = min(nextDue ?? due, due)
    }

    /// Hands every answer due by `now` to `submit`, in the order they were
    /// added, and keeps the rest.
    mutating func submitDue(now: UInt64, _ submit: (Int32, HTTP2Response) -> Void) {
        guard let due = nextDue, due <= now else { return }
        var next: UInt64?
        items.removeAll { item in
            guard item.due <= now else {
                next = min(next ?? item.due, item.due)
                return false
            }
            submit(item.stream, item.response)
            return true
        }
        nextDue = next
    }
}
