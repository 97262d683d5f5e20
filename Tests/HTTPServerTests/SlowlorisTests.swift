import Foundation
@testable import HTTPServer
import Testing
import RelayBasics

#if canImport(Glibc)
    import Glibc
#endif

/// Many sockets from one address, each dribbling one header line at a time
/// and never finishing its request: the attack that once held every
/// connection slot of the ingress.
final class SlowAttack: Sendable {
    struct Report: Sendable {
        var opened: Int
        /// Seconds from connect until the server closed each socket.
        var lifetimes: [Double]
        /// Sockets the server had not closed when the attack gave up.
        var stillOpen: Int
    }

    let port: UInt16
    let sockets: Int
    let source: String
    let interval: Duration
    let giveUp: Duration

    init(port: UInt16, sockets: Int, source: String, interval: Duration, giveUp: Duration) {
        self.port = port
        self.sockets = sockets
        self.source = source
        self.interval = interval
        self.giveUp = giveUp
    }

    /// Connects every socket and sends each a request line, yields once on
    /// `ready`, then keeps dribbling until the server has closed them all or
    /// `giveUp` has passed. Blocking: run it with `offPool`.
    func run(ready: AsyncStream<Void>.Continuation) -> Report {
        let clock = ContinuousClock()
        var open: [(fd: Int32, since: ContinuousClock.Instant)] = []
        for _ in 0..<sockets {
            let fd = RawHTTP.connect(port: port, source: source)
            guard fd >= 0 else { continue }
            open.append((fd, clock.now))
            RawHTTP.send(fd, Array("GET /hello/slow HTTP/1.1\r\nHost: x\r\n".utf8))
        }
        let opened = open.count
        ready.yield()
        ready.finish()
        var lifetimes: [Double] = []
        let start = clock.now
        var line = 0
        while !open.isEmpty, start.duration(to: clock.now) < giveUp {
            // Wait one interval for the server to close any of them.
            var polls = open.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            _ = poll(&polls, nfds_t(polls.count), Int32(interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000))
            line += 1
            var still: [(fd: Int32, since: ContinuousClock.Instant)] = []
            var scratch = [UInt8](repeating: 0, count: 4096)
            for (index, socket) in open.enumerated() {
                var closed = polls[index].revents & Int16(POLLHUP | POLLERR) != 0
                if !closed, polls[index].revents & Int16(POLLIN) != 0 {
                    closed = recv(socket.fd, &scratch, scratch.count, Int32(MSG_DONTWAIT)) <= 0
                }
                if !closed { closed = !RawHTTP.send(socket.fd, Array("X-Slow-\(line): y\r\n".utf8)) }
                if closed {
                    lifetimes.append(socket.since.duration(to: clock.now).seconds)
                    close(socket.fd)
                } else {
                    still.append(socket)
                }
            }
            open = still
        }
        for socket in open { close(socket.fd) }
        return Report(opened: opened, lifetimes: lifetimes, stillOpen: open.count)
    }
}

@Suite("HTTP server under slowloris")
struct SlowlorisTests {
    @Test("300 dribbling sockets from 127.0.0.2: at most the per-address cap get in, each is cut within the request timeout, and every request from 127.0.0.1 is served")
    func slowloris() async throws {
        // A connection limit the attack alone could fill, and an idle timeout
        // (30 s) the dribble keeps resetting: without the per-address cap and
        // the whole-request deadline, the attack holds every slot.
        let server = try makeServer { configuration in
            configuration.connectionLimit = 200
            configuration.connectionsPerClientLimit = 50
            configuration.requestTimeoutSeconds = 2
        }
        let attack = SlowAttack(port: server.port, sockets: 300, source: "127.0.0.2", interval: .milliseconds(500), giveUp: .seconds(25))
        let ready = AsyncStream<Void>.makeStream()
        async let report = offPool { attack.run(ready: ready.continuation) }
        for await _ in ready.stream {}

        // Normal clients while the attack runs, one after another.
        var statuses: [String] = []
        var latencies: [Double] = []
        for _ in 0..<20 {
            let (output, _) = try await Curl.run([
                "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", "http://127.0.0.1:\(server.port)/hello/x",
            ])
            let fields = output.split(separator: " ")
            statuses.append(fields.first.map(String.init) ?? output)
            latencies.append(fields.dropFirst().first.flatMap { Double($0) } ?? -1)
        }
        let result = await report
        let longest = result.lifetimes.max() ?? 0
        print("slowloris: \(result.opened) sockets opened; \(server.requestsTimedOut) cut by the request deadline; longest lived \(longest) s; \(result.stillOpen) still open; normal requests \(statuses.filter { $0 == "200" }.count)/\(statuses.count) served, slowest \(latencies.max() ?? -1) s")

        #expect(statuses.allSatisfy { $0 == "200" }, "normal requests during the attack: \(statuses)")
        #expect(result.stillOpen == 0, "sockets the server never closed")
        #expect(longest < 12, "a dribbling socket lived \(longest) s; the request timeout is 2 s")
        #expect(server.requestsTimedOut >= 1)
        #expect(server.requestsTimedOut <= 50, "no more than the per-address cap got in")
        await server.stop()
    }

    @Test("a kept-alive connection may idle past the request timeout (up to the idle timeout) and send its next request")
    func keepAliveIdle() async throws {
        let server = try makeServer { $0.requestTimeoutSeconds = 1 }
        let port = server.port
        let statuses = await offPool { () -> [Int] in
            let fd = RawHTTP.connect(port: port)
            defer { close(fd) }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var statuses: [Int] = []
            for round in 0..<2 {
                // Idle longer than the request timeout before the second request.
                if round == 1 { usleep(2_500_000) }
                guard RawHTTP.send(fd, Array("GET /hello/x HTTP/1.1\r\nHost: x\r\n\r\n".utf8)) else { break }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = recv(fd, &buffer, buffer.count, 0)
                guard count > 0 else { break }
                let line = String(decoding: buffer[0..<count], as: UTF8.self).prefix(12)
                statuses.append(Int(line.dropFirst(9)) ?? 0)
            }
            return statuses
        }
        #expect(statuses == [200, 200])
        #expect(server.requestsTimedOut == 0)
        await server.stop()
    }
}
