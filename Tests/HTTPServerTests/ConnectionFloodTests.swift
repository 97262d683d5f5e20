import Foundation
@testable import HTTPServer
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Idle and header-dribbling sockets from many loopback addresses, each
/// address under the per-address cap, together over the global limit; the
/// flood reconnects whatever the server closes, as a persistent attacker
/// would. Linux routes all of 127/8 to lo, so a socket bound to 127.0.0.9
/// reaches a server on 127.0.0.1.
final class ManyAddressFlood: Sendable {
    struct Report: Sendable {
        var opened = 0
        var reconnects = 0
        /// Most flood sockets open at once (as the client saw them).
        var peakOpen = 0
    }

    let port: UInt16
    let addresses: [String]
    let perAddress: Int
    /// Reconnects at most, so the flood ends whatever the server does.
    let reconnectBudget: Int
    let giveUp: Duration
    private let stopped = Atomic<Bool>(false)

    init(port: UInt16, addresses: [String], perAddress: Int, reconnectBudget: Int, giveUp: Duration) {
        self.port = port
        self.addresses = addresses
        self.perAddress = perAddress
        self.reconnectBudget = reconnectBudget
        self.giveUp = giveUp
    }

    func stop() { stopped.store(true, ordering: .relaxed) }

    /// A socket from `source` connected to the server, or -1; connect waits
    /// at most 200 ms (a full backlog must not stall the flood loop).
    static func connect(port: UInt16, source: String, timeoutMilliseconds: Int = 200) -> Int32 {
        RawHTTP.connect(port: port, source: source, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// Opens every socket (even ones idle, odd ones dribbling a head), yields
    /// once on `ready`, then reconnects what the server closes and dribbles
    /// a header line every half second, until ``stop()``, the reconnect
    /// budget or `giveUp`. Blocking: run it with `offPool`.
    func run(ready: AsyncStream<Void>.Continuation) -> Report {
        var report = Report()
        struct Flooder {
            var fd: Int32
            var source: String
            var dribbles: Bool
        }
        func connectFlooder(_ source: String, dribbles: Bool) -> Flooder? {
            let fd = Self.connect(port: port, source: source)
            guard fd >= 0 else { return nil }
            if dribbles { _ = RawHTTP.send(fd, Array("POST /echo HTTP/1.1\r\nHost: x\r\n".utf8)) }
            return Flooder(fd: fd, source: source, dribbles: dribbles)
        }
        var open: [Flooder] = []
        var lost: [(source: String, dribbles: Bool)] = []
        for index in 0..<perAddress {
            for source in addresses {
                if let flooder = connectFlooder(source, dribbles: index % 2 == 1) { open.append(flooder) } else { lost.append((source, index % 2 == 1)) }
            }
        }
        report.opened = open.count
        report.peakOpen = open.count
        ready.yield()
        ready.finish()

        let clock = ContinuousClock()
        let start = clock.now
        var lastDribble = start
        var line = 0
        var scratch = [UInt8](repeating: 0, count: 4096)
        while !stopped.load(ordering: .relaxed), start.duration(to: clock.now) < giveUp {
            var polls = open.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            _ = poll(&polls, nfds_t(polls.count), 100)
            let dribbleNow = lastDribble.duration(to: clock.now) >= .milliseconds(500)
            if dribbleNow {
                lastDribble = clock.now
                line += 1
            }
            var still: [Flooder] = []
            for (index, flooder) in open.enumerated() {
                var closed = polls[index].revents & Int16(POLLHUP | POLLERR) != 0
                if !closed, polls[index].revents & Int16(POLLIN) != 0 {
                    closed = recv(flooder.fd, &scratch, scratch.count, Int32(MSG_DONTWAIT)) <= 0
                }
                if !closed, dribbleNow, flooder.dribbles {
                    closed = !RawHTTP.send(flooder.fd, Array("X-Dribble-\(line): y\r\n".utf8))
                }
                if closed {
                    close(flooder.fd)
                    lost.append((flooder.source, flooder.dribbles))
                } else {
                    still.append(flooder)
                }
            }
            open = still
            // Reconnect what was lost, while the budget lasts.
            var retry: [(source: String, dribbles: Bool)] = []
            for socket in lost {
                guard report.reconnects < reconnectBudget else { break }
                report.reconnects += 1
                if let flooder = connectFlooder(socket.source, dribbles: socket.dribbles) { open.append(flooder) } else { retry.append(socket) }
            }
            lost = retry
            report.peakOpen = max(report.peakOpen, open.count)
        }
        for flooder in open { close(flooder.fd) }
        return report
    }
}

/// One request from 127.0.0.1 on a new connection, timed on the monotonic
/// clock: the status (0 when no answer came within 3 s) and the seconds.
func timedRequest(port: UInt16) async -> (status: Int, seconds: Double) {
    await offPool {
        let clock = ContinuousClock()
        let start = clock.now
        let fd = ManyAddressFlood.connect(port: port, source: "127.0.0.1", timeoutMilliseconds: 3000)
        guard fd >= 0 else { return (0, start.duration(to: clock.now).seconds) }
        defer { close(fd) }
        var limit = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        RawHTTP.send(fd, Array("GET /hello/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            received += buffer[0..<count]
        }
        let line = String(decoding: received.prefix(12), as: UTF8.self)
        return (Int(line.dropFirst(9)) ?? 0, start.duration(to: clock.now).seconds)
    }
}

@Suite("HTTP server under a many-address connection flood")
struct ConnectionFloodTests {
    @Test("294 idle and dribbling sockets from 21 addresses over a 256-connection limit: 100 requests from 127.0.0.1 all answered, p99 under 1 s, and a served keep-alive connection survives")
    func manyAddressFlood() async throws {
        // The attack scaled down by 8: a global limit the flood alone
        // fills, a per-address cap each address stays under, and a request
        // timeout (15 s) long enough that deadlines cannot rescue anyone.
        let server = try makeServer { configuration in
            configuration.connectionLimit = 256
            configuration.connectionsPerClientLimit = 32
            configuration.requestTimeoutSeconds = 15
            configuration.connectionTimeoutSeconds = 60
        }
        let port = server.port
        // A working client's kept-alive connection, served once before the flood.
        let keptAlive = ManyAddressFlood.connect(port: port, source: "127.0.0.1", timeoutMilliseconds: 3000)
        try #require(keptAlive >= 0)
        defer { close(keptAlive) }
        var limit = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(keptAlive, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let keptAliveStatus = { @Sendable () -> Int in
            guard RawHTTP.send(keptAlive, Array("GET /hello/k HTTP/1.1\r\nHost: x\r\n\r\n".utf8)) else { return -1 }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(keptAlive, &buffer, buffer.count, 0)
            guard count > 0 else { return 0 }
            return Int(String(decoding: buffer[0..<min(count, 12)], as: UTF8.self).dropFirst(9)) ?? 0
        }
        #expect(await offPool(keptAliveStatus) == 200)

        let addresses = (2...22).map { "127.0.0.\($0)" }
        let flood = ManyAddressFlood(port: port, addresses: addresses, perAddress: 14, reconnectBudget: 6000, giveUp: .seconds(120))
        let ready = AsyncStream<Void>.makeStream()
        async let floodReport = offPool { flood.run(ready: ready.continuation) }
        for await _ in ready.stream {}

        var statuses: [Int] = []
        var latencies: [Double] = []
        for _ in 0..<100 {
            let (status, seconds) = await timedRequest(port: port)
            statuses.append(status)
            latencies.append(seconds)
        }
        let secondOnKeptAlive = await offPool(keptAliveStatus)
        flood.stop()
        let report = await floodReport
        let sorted = latencies.sorted()
        let p99 = sorted[98]
        print("many-address flood: \(report.opened) sockets opened from \(addresses.count) addresses, \(report.reconnects) reconnects, peak \(report.peakOpen) open; \(server.connectionsShed) shed; normal requests \(statuses.filter { $0 == 200 }.count)/\(statuses.count) answered 200, median \(sorted[49]) s, p99 \(p99) s, slowest \(sorted[99]) s")

        #expect(report.opened == addresses.count * 14, "every flood socket connected (the flood really was over the limit)")
        #expect(statuses.allSatisfy { $0 == 200 }, "normal requests during the flood: \(statuses)")
        #expect(p99 < 1.0, "p99 \(p99) s")
        #expect(secondOnKeptAlive == 200, "a kept-alive connection that was served is not shed while unserved ones remain")
        #expect(server.connectionsShed >= report.opened - 256, "the flood was shed down to the limit")
        await server.stop()
    }
}
