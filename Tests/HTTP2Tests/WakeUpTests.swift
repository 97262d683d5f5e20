import Glibc
@testable import HTTP2
import Testing

/// The connection thread's needs-wake-up protocol (`ConnectionHandOff.Shared.sleeping`):
/// senders write the eventfd only while the thread sleeps in poll(). A lost
/// wake-up would leave a request in the hand-over queue with the thread
/// asleep. With the one-second sleep cap and every deadline an hour away,
/// nothing else wakes the thread: a racy hand-over hangs these tests (the
/// time limit fails them) instead of slowing them down by a second.
@Suite("HTTP/2 client: no lost wake-ups")
struct WakeUpTests {
    /// A connection to `local` that sleeps until woken or an hour passes.
    private static func sleepy(_ local: LocalServer, loop: ConnectionLoop = ConnectionLoop()) -> HTTP2Connection {
        var tuning = HTTP2Connection.Tuning()
        tuning.longestSleep = 3600
        // The thread dawdles before it looks at the hand-over queue one last
        // time, so that a sender resumed by the previous answer hands its
        // next request over in that window (where a racy check loses it)
        // on most turns, not by rare chance.
        tuning.beforeSleep = { usleep(200) }
        return local.connection({ $0.pingInterval = 3600; $0.idleTimeout = 3600 }, loop: loop, tuning: tuning)
    }

    private static func request(_ path: String) -> HTTP2Request {
        HTTP2Request(method: "GET", path: path, timeout: 3600)
    }

    /// One sender task per entry of `senders`, each sending `each` requests
    /// one after the other on its connection; how many came back right.
    private static func answered(senders: [HTTP2Connection], each: Int) async -> Int {
        await withTaskGroup(of: Int.self) { group in
            for (sender, connection) in senders.enumerated() {
                group.addTask {
                    var answered = 0
                    for index in 0..<each {
                        let path = "/\(sender)/\(index)"
                        if let response = try? await connection.send(request(path)), response.body == Array(path.utf8) { answered += 1 }
                    }
                    return answered
                }
            }
            return await group.reduce(0, +)
        }
    }

    @Test("one sender, each request handed over as the thread goes back to sleep after the previous answer", .timeLimit(.minutes(2)))
    func sequentialSender() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let connection = Self.sleepy(local)
        for index in 0..<2000 {
            let response = try await connection.send(Self.request("/s/\(index)"))
            #expect(response.body == Array("/s/\(index)".utf8))
        }
        await connection.close()
    }

    @Test("many concurrent senders beyond the stream limit: every request is answered", .timeLimit(.minutes(2)))
    func concurrentSenders() async throws {
        let local = try LocalServer(maxConcurrentStreams: 4, handler: echoHandler)
        defer { local.stop() }
        let connection = Self.sleepy(local)
        let answered = await Self.answered(senders: Array(repeating: connection, count: 32), each: 150)
        #expect(answered == 32 * 150)
        await connection.close()
    }

    @Test("two connections on one loop thread, a sequential sender on each: every request is answered", .timeLimit(.minutes(2)))
    func sharedLoop() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let loop = ConnectionLoop()
        let connections = [Self.sleepy(local, loop: loop), Self.sleepy(local, loop: loop)]
        let answered = await Self.answered(senders: connections, each: 1000)
        #expect(answered == 2000)
        #expect(local.server.acceptedConnections == 2)
        for connection in connections { await connection.close() }
    }
}
