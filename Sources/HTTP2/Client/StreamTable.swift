import RelayBasics

/// The requests a client connection's thread holds, each in exactly one
/// place: waiting for a stream (a FIFO, in the order they were handed
/// over), or on a stream, with its response as it arrives. Each request
/// leaves through one of the `remove…`/`take…` calls, which hand it back
/// for the caller to answer; the table never answers one itself.
///
/// Also keeps a lower bound on each part's earliest deadline, so that a
/// turn of the loop does not look through every request to find it.
struct StreamTable {
    /// A request on a stream and its response so far.
    struct Record {
        var pending: PendingRequest
        var deadline: UInt64
        var status: Int?
        var headers: [HTTPHeader] = []
        var body: [UInt8] = []
        var ended = false
        /// This side sent the request's END_STREAM: the server may act on it.
        var requestWritten = false
        /// Why the response was refused as too large (the stream is reset).
        var oversized: String?
    }

    typealias Index = Dictionary<Int32, Record>.Index

    // The calls a request makes on its way through (`@inline(__always)`)
    // are inlined into the session's callbacks and the loop's turn, as the
    // code was before it moved here: left as calls, passing a header or a
    // record across cost a retain and a release each (callgrind: about 200
    // instructions per send, most in the header callback).

    private var waiting: [PendingRequest] = []
    private var waitingHead = 0
    private var streams: [Int32: Record] = [:]
    private var streamByToken: [UInt64: Int32] = [:]
    /// No request on a stream (or waiting) has a deadline before this:
    /// lowered as requests come in, made exact again by the look through
    /// them once it passes.
    private(set) var streamDeadlineBound = UInt64.max
    private(set) var waitingDeadlineBound = UInt64.max

    /// Requests on a stream now.
    var openCount: Int { streams.count }
    var hasOpenStreams: Bool { !streams.isEmpty }
    /// Requests still waiting for a stream.
    var hasWaiting: Bool { waitingHead < waiting.count }

    // MARK: Waiting

    /// Adds requests taken from the hand-over at the end of the FIFO.
    @inline(__always)
    mutating func appendWaiting(_ taken: [PendingRequest]) {
        for pending in taken { waitingDeadlineBound = min(waitingDeadlineBound, pending.deadline) }
        waiting.append(contentsOf: taken)
    }

    /// The request first in line for a stream, taken out of the FIFO.
    @inline(__always)
    mutating func nextWaiting() -> PendingRequest? {
        guard waitingHead < waiting.count else { return nil }
        let pending = waiting[waitingHead]
        waitingHead += 1
        return pending
    }

    /// Gives back the FIFO's taken front: all of it once every request was
    /// taken (the buffer kept), or the front alone once it is most of a
    /// long FIFO.
    mutating func compactWaiting() {
        if waitingHead == waiting.count, waitingHead > 0 {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        } else if waitingHead > 1024, waitingHead * 2 > waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
    }

    /// Takes the waiting request with `token` out of the FIFO, if there is one.
    mutating func removeWaiting(token: UInt64) -> PendingRequest? {
        guard let index = waiting[waitingHead...].firstIndex(where: { $0.token == token }) else { return nil }
        return waiting.remove(at: index)
    }

    /// Takes the waiting requests whose deadline has passed. The FIFO is
    /// only looked through once `waitingDeadlineBound` has passed.
    mutating func removeExpiredWaiting(now: UInt64) -> [PendingRequest] {
        guard waitingDeadlineBound <= now else { return [] }
        waitingDeadlineBound = waiting[waitingHead...].lazy.filter { $0.deadline > now }.map(\.deadline).min() ?? .max
        guard waiting[waitingHead...].contains(where: { $0.deadline <= now }) else { return [] }
        let (expired, kept) = waiting[waitingHead...].reduce(into: ([PendingRequest](), [PendingRequest]())) { split, pending in
            if pending.deadline <= now { split.0.append(pending) } else { split.1.append(pending) }
        }
        waiting = kept
        waitingHead = 0
        return expired
    }

    /// Takes every waiting request, in order.
    mutating func takeWaiting() -> ArraySlice<PendingRequest> {
        let taken = waiting[waitingHead...]
        waiting.removeAll()
        waitingHead = 0
        return taken
    }

    // MARK: On a stream

    /// Records `pending` as sent on `stream`.
    @inline(__always)
    mutating func open(_ stream: Int32, for pending: PendingRequest) {
        streams[stream] = Record(pending: pending, deadline: pending.deadline)
        streamDeadlineBound = min(streamDeadlineBound, pending.deadline)
        streamByToken[pending.token] = stream
    }

    /// Takes `stream`'s request and response out of the table.
    @inline(__always)
    mutating func remove(_ stream: Int32) -> Record? {
        guard let record = streams.removeValue(forKey: stream) else { return nil }
        streamByToken[record.pending.token] = nil
        return record
    }

    /// Takes the request with `token` off its stream, if it is on one.
    mutating func remove(token: UInt64) -> (stream: Int32, record: Record)? {
        guard let stream = streamByToken[token], let record = remove(stream) else { return nil }
        return (stream, record)
    }

    /// Takes the streams whose deadline has passed. The streams are only
    /// looked through once `streamDeadlineBound` has passed, not on every turn.
    mutating func removeExpiredStreams(now: UInt64) -> [(stream: Int32, record: Record)] {
        guard streamDeadlineBound <= now else { return [] }
        var earliest = UInt64.max
        var expired: [(stream: Int32, record: Record)] = []
        for (stream, record) in streams {
            if record.deadline <= now { expired.append((stream, record)) } else { earliest = min(earliest, record.deadline) }
        }
        for (stream, _) in expired { _ = remove(stream) }
        streamDeadlineBound = earliest
        return expired
    }

    /// Takes the streams above `lastStream` (those a GOAWAY says the server
    /// will never process).
    mutating func removeStreams(above lastStream: Int32) -> [(stream: Int32, record: Record)] {
        var above: [(stream: Int32, record: Record)] = []
        for (stream, record) in streams where stream > lastStream { above.append((stream, record)) }
        for (stream, _) in above { _ = remove(stream) }
        return above
    }

    /// Takes every stream.
    mutating func removeAllStreams() -> [Int32: Record] {
        defer {
            streams.removeAll()
            streamByToken.removeAll()
        }
        return streams
    }

    // MARK: The response as it arrives (the session's callbacks)

    /// Where `stream`'s response is kept, unless the stream is not in the
    /// table or its response was refused as oversized. Updates go through
    /// the index: `streams[stream]?.…` copied the record out and hashed twice.
    @inline(__always)
    mutating func receiving(_ stream: Int32) -> Index? {
        guard let index = streams.index(forKey: stream), inPlace(index, { $0.oversized == nil }) else { return nil }
        return index
    }

    /// `body` on the record at `index`, in place: through the dictionary's
    /// modify accessor. Reading `streams.values[index].…` went through its
    /// getter, which copied the whole record out (its arrays and request
    /// retained and released) for every header the server sent.
    @inline(__always)
    private mutating func inPlace<T>(_ index: Index, _ body: (inout Record) -> T) -> T {
        body(&streams.values[index])
    }

    @inline(__always)
    mutating func setStatus(_ status: Int?, at index: Index) {
        streams.values[index].status = status
    }

    @inline(__always)
    mutating func headerCount(at index: Index) -> Int { inPlace(index) { $0.headers.count } }

    @inline(__always)
    mutating func appendHeader(_ header: HTTPHeader, at index: Index) {
        streams.values[index].headers.append(header)
    }

    @inline(__always)
    mutating func bodyCount(at index: Index) -> Int { inPlace(index) { $0.body.count } }

    @inline(__always)
    mutating func appendBody(_ bytes: UnsafeRawBufferPointer, at index: Index) {
        streams.values[index].body.append(contentsOf: bytes)
    }

    /// The peer ended its side of `stream`. Through the index:
    /// `streams[stream]?.ended = true` went through the dictionary's and the
    /// optional's modify accessors, three heap allocations per answer.
    @inline(__always)
    mutating func markEnded(_ stream: Int32) {
        guard let index = streams.index(forKey: stream) else { return }
        streams.values[index].ended = true
    }

    /// The request on `stream` went out whole (its END_STREAM frame left).
    @inline(__always)
    mutating func markRequestWritten(_ stream: Int32) {
        guard let index = streams.index(forKey: stream) else { return }
        streams.values[index].requestWritten = true
    }

    /// Drops what the stream's response brought so far and keeps `reason`,
    /// for its request to fail with when the stream closes.
    mutating func refuse(at index: Index, _ reason: String) {
        streams.values[index].oversized = reason
        streams.values[index].headers = []
        streams.values[index].body = []
    }
}
