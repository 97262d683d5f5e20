@testable import HTTP2
import RelayBasics
import Testing

/// The client connection's stream table on its own: no thread, socket or
/// session. Each request it holds is in one place (waiting or on a stream),
/// comes out through exactly one call, and the deadline bounds never let a
/// due request go unnoticed.
@Suite("HTTP/2 client: the stream table")
struct StreamTableTests {
    /// Requests with tokens 1...deadlines.count and those deadlines, each
    /// awaited by a task of its own; `answers` waits for what each got.
    private struct Requests {
        let pending: [PendingRequest]
        let tasks: [Task<Result<HTTP2Response, HTTP2Error>, Never>]

        init(deadlines: [UInt64]) async {
            let (made, out) = AsyncStream<PendingRequest>.makeStream()
            tasks = deadlines.enumerated().map { index, deadline in
                Task {
                    await withUnsafeContinuation { (continuation: UnsafeContinuation<Result<HTTP2Response, HTTP2Error>, Never>) in
                        out.yield(PendingRequest(
                            token: UInt64(index + 1), request: HTTP2Request(method: "GET", path: "/\(index + 1)"),
                            deadline: deadline, continuation: continuation))
                    }
                }
            }
            var pending: [PendingRequest] = []
            for await request in made {
                pending.append(request)
                if pending.count == deadlines.count { break }
            }
            self.pending = pending.sorted { $0.token < $1.token }
        }

        subscript(token: UInt64) -> PendingRequest { pending[Int(token) - 1] }

        /// Each request's answer, by token: the status, or the error's message.
        func answers() async -> [String] {
            var answers: [String] = []
            for task in tasks {
                switch await task.value {
                case .success(let response): answers.append(String(response.status))
                case .failure(let error): answers.append(error.message)
                }
            }
            return answers
        }
    }

    private static func fail(_ requests: some Sequence<PendingRequest>, _ why: String) {
        for pending in requests { pending.finish(.failure(HTTP2Error(.closed, why))) }
    }

    @Test("waiting requests leave in order, onto streams found by id and by token; each comes out once")
    func fifoAndStreams() async {
        let requests = await Requests(deadlines: [100, 100, 100, 100])
        var table = StreamTable()
        table.appendWaiting(Array(requests.pending))
        #expect(table.hasWaiting && !table.hasOpenStreams)

        var opened: [UInt64] = []
        while table.openCount < 3, let pending = table.nextWaiting() {
            opened.append(pending.token)
            table.open(Int32(2 * pending.token - 1), for: pending)
        }
        #expect(opened == [1, 2, 3])
        #expect(table.openCount == 3 && table.hasWaiting)
        table.compactWaiting()

        // Token 2 is on stream 3; token 4 still waits; token 9 is nowhere.
        let onStream = table.remove(token: 2)
        #expect(onStream?.stream == 3)
        #expect(table.remove(token: 2) == nil)
        #expect(table.remove(token: 9) == nil && table.removeWaiting(token: 9) == nil)
        let waiting = table.removeWaiting(token: 4)
        #expect(waiting?.token == 4 && !table.hasWaiting)
        #expect(table.remove(3) == nil, "stream 3's request was taken by its token")
        let first = table.remove(1)
        #expect(first?.pending.token == 1 && table.openCount == 1)
        let rest = table.removeAllStreams()
        #expect(rest.keys.sorted() == [5] && !table.hasOpenStreams)

        Self.fail([first?.pending, onStream?.record.pending, rest[5]?.pending, waiting].compactMap { $0 }, "done")
        #expect(await requests.answers() == ["done", "done", "done", "done"])
    }

    @Test("a request expires once its deadline passes, not before; the bounds become exact again")
    func deadlines() async {
        let requests = await Requests(deadlines: [30, 10, 20, 50, 40])
        var table = StreamTable()
        table.appendWaiting([requests[1], requests[2], requests[3]])
        #expect(table.waitingDeadlineBound == 10)
        #expect(table.removeExpiredWaiting(now: 9).isEmpty)
        let expiredWaiting = table.removeExpiredWaiting(now: 15)
        #expect(expiredWaiting.map(\.token) == [2])
        #expect(table.waitingDeadlineBound == 20)

        table.open(1, for: requests[4])
        table.open(3, for: requests[5])
        #expect(table.streamDeadlineBound == 40)
        #expect(table.removeExpiredStreams(now: 39).isEmpty)
        let expiredStreams = table.removeExpiredStreams(now: 45)
        #expect(expiredStreams.map { $0.stream } == [3])
        #expect(table.streamDeadlineBound == 50 && table.openCount == 1)
        // A bound that is early (its request answered) is made exact by the next look, finding nothing due.
        let answered = table.remove(1)
        #expect(table.removeExpiredStreams(now: 55).isEmpty)
        #expect(table.streamDeadlineBound == .max)

        // The FIFO keeps its order past an expiry in its middle.
        let expiredLater = table.removeExpiredWaiting(now: 25)
        #expect(expiredLater.map(\.token) == [3])
        let next = table.nextWaiting()
        #expect(next?.token == 1 && !table.hasWaiting)

        Self.fail(expiredWaiting + expiredLater, "no stream in time")
        Self.fail(expiredStreams.map { $0.record.pending }, "no answer in time")
        Self.fail([next, answered?.pending].compactMap { $0 }, "done")
        #expect(await requests.answers() == ["done", "no stream in time", "no stream in time", "done", "no answer in time"])
    }

    @Test("GOAWAY: the streams above its last-stream-id and every waiting request come out, the rest stay")
    func goAway() async {
        let requests = await Requests(deadlines: [100, 100, 100, 100])
        var table = StreamTable()
        table.open(1, for: requests[1])
        table.open(3, for: requests[2])
        table.open(5, for: requests[3])
        table.appendWaiting([requests[4]])
        let above = table.removeStreams(above: 1)
        #expect(above.map { $0.stream }.sorted() == [3, 5])
        #expect(table.remove(token: 2) == nil && table.openCount == 1)
        let neverSent = table.takeWaiting()
        #expect(neverSent.map(\.token) == [4] && !table.hasWaiting)

        Self.fail(above.map { $0.record.pending }, "unprocessed")
        Self.fail(neverSent, "not sent")
        Self.fail(table.removeAllStreams().values.map(\.pending), "done")
        #expect(await requests.answers() == ["done", "unprocessed", "unprocessed", "not sent"])
    }

    @Test("a response builds up in its stream's record; a refused one takes nothing more")
    func responses() async throws {
        let requests = await Requests(deadlines: [100, 100])
        var table = StreamTable()
        table.open(1, for: requests[1])
        table.open(3, for: requests[2])
        #expect(table.receiving(7) == nil)

        let receiving = table.receiving(1)
        let index = try #require(receiving)
        table.setStatus(200, at: index)
        table.appendHeader(HTTPHeader("apns-id", "x"), at: index)
        Array("{}".utf8).withUnsafeBytes { table.appendBody($0, at: index) }
        #expect(table.headerCount(at: index) == 1 && table.bodyCount(at: index) == 2)
        table.markEnded(1)
        table.markEnded(7)

        let receivingRefused = table.receiving(3)
        let refused = try #require(receivingRefused)
        table.appendHeader(HTTPHeader("a", "b"), at: refused)
        table.refuse(at: refused, "too big")
        #expect(table.receiving(3) == nil)

        let answeredRecord = table.remove(1)
        let answered = try #require(answeredRecord)
        #expect(answered.status == 200 && answered.ended && answered.headers == [HTTPHeader("apns-id", "x")] && answered.body == Array("{}".utf8))
        let oversizedRecord = table.remove(3)
        let oversized = try #require(oversizedRecord)
        #expect(oversized.oversized == "too big" && oversized.headers.isEmpty && !oversized.ended)

        answered.pending.finish(.success(HTTP2Response(status: answered.status!, body: answered.body)))
        oversized.pending.finish(.failure(HTTP2Error(.proto, oversized.oversized!)))
        #expect(await requests.answers() == ["200", "too big"])
    }
}
