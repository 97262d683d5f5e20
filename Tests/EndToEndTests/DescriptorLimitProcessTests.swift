import Foundation
import MockAPNs
import Testing
import TestSupport

/// `serve` at its open-file limit (a hard `ulimit -n` reached: a container's
/// 1024, a flood of connections). Before: the next APNs connection's eventfd
/// (`precondition`) or the next host lookup's pipe ended the process with a
/// crash, and the HTTP/2 APNs listener polled a listening socket it could
/// not accept on at once, a core spinning. Now a connection that cannot be
/// set up fails like a refused connect (and a connection pool whose shared
/// loop was made without one makes another), a lookup without its pipe fails
/// like an unknown name, and the HTTP/2 listener rests its accept until a
/// descriptor is free. (libmicrohttpd's listeners, the ingress and
/// `/metrics`, still spin in this state when they have no connection open:
/// 0.9.75's own accept does; docs/operations.md says so.)
///
/// The limit is lowered to 3 (standard input, output and error) on the
/// running process with `prlimit`: no new descriptor at all, whichever are
/// closed meanwhile, while those already open (the test's kept-alive
/// connection, the journal) go on working.
@Suite("serve at its open-file limit, as a process", .serialized)
struct DescriptorLimitProcessTests {
    /// Sets `pid`'s soft RLIMIT_NOFILE (`prlimit` from util-linux), leaving the hard one.
    static func setOpenFileLimit(of pid: Int32, soft: String) async throws {
        let (status, output) = try await ProcessRunner.runOffPool(["prlimit", "--pid", "\(pid)", "--nofile=\(soft):"])
        guard status == 0 else { throw TestRelayError("prlimit: \(output)") }
    }

    /// `pid`'s soft RLIMIT_NOFILE as prlimit prints it.
    static func openFileLimit(of pid: Int32) async throws -> String {
        let (status, output) = try await ProcessRunner.runOffPool(["prlimit", "--pid", "\(pid)", "--nofile", "--output", "SOFT", "--noheadings"])
        guard status == 0 else { throw TestRelayError("prlimit: \(output)") }
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// CPU seconds `pid` has used (user + system, /proc/PID/stat).
    static func cpuSeconds(of pid: Int32) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
        // After the name: state is field 3, utime 14 and stime 15 (1-based, as proc(5) counts).
        return Double(Int(fields[11])! + Int(fields[12])!) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The whole number right after `key` in `line` (0 when none).
    static func number(after key: String, in line: String) -> Int {
        guard let range = line.range(of: key) else { return 0 }
        return Int(line[range.upperBound...].prefix { $0.isNumber }) ?? 0
    }

    /// A TCP connection to `port` on loopback, left for the listener to accept (or not).
    static func connection(to port: UInt16) throws -> Int32 {
        let fd = KeepAliveClient.connectLoopback(port: port, receiveTimeoutSeconds: 30)
        guard fd >= 0 else { throw TestRelayError("connect to \(port): \(String(cString: strerror(errno)))") }
        return fd
    }

    /// Whether an HTTP/2 server (prior knowledge, cleartext) answers the
    /// client preface on `fd` with its SETTINGS: it accepted the connection and serves it.
    static func answersPreface(on fd: Int32) -> Bool {
        sendPreface(on: fd) && receivesSettings(on: fd)
    }

    /// Writes the client preface, then an empty SETTINGS frame (length 0,
    /// type 4, no flags, stream 0) on `fd`; whether all of it went.
    static func sendPreface(on fd: Int32) -> Bool {
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0]
        return preface.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == preface.count
    }

    /// Whether the next bytes on `fd` start with a SETTINGS frame (false at EOF or a reset).
    static func receivesSettings(on fd: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count >= 9 && buffer[3] == 4
    }

    /// Whether a `GET path` on `fd` is answered 200: the listener accepted the connection and serves it.
    static func answersGet(_ path: String, on fd: Int32) -> Bool {
        sendGet(path, on: fd) && answerHead(on: fd).hasPrefix("HTTP/1.1 200")
    }

    /// Writes a `GET path` (closing the connection after its answer) on `fd`; whether all of it went.
    static func sendGet(_ path: String, on fd: Int32) -> Bool {
        let request = Array("GET \(path) HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n".utf8)
        return request.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == request.count
    }

    /// The first bytes of the answer on `fd` (up to 64), or "recv: N" when none came.
    static func answerHead(on fd: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : "recv: \(count)"
    }

    /// A mock APNs beside `setup`'s whose every stream ends its connection
    /// (a graceful GOAWAY): each send needs a new APNs connection.
    static func goAwayAfterEveryStream(beside setup: APNsHTTP2FaultProcessTests.Setup) throws -> MockAPNsServer {
        var configuration = setup.relay.mock.engine.configuration
        configuration.goAwayAfterStreams = (count: 1, graceful: true)
        let directory = setup.relay.directory + "/goaway"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return try MockAPNsServer(engine: MockAPNsEngine(configuration: configuration), directory: directory)
    }

    /// The end of a case whose three sends were answered 200, 502, 200:
    /// the counters tell what the answers tell, SIGTERM drains with exit 0,
    /// and the rows tell it too.
    static func expectOneFailedTwoSucceeded(
        _ setup: APNsHTTP2FaultProcessTests.Setup, metricsPort: UInt16, serve: RelayProcess, database: String
    ) async throws {
        let scrape = try await setup.relay.curl("GET", "/metrics", key: nil, base: "http://127.0.0.1:\(metricsPort)")
        let counted = OutcomeAgreementTests.sums(scrape.body, "apns_relay_sends_total", by: "outcome")
        #expect(counted == ["success": 2, "failed": 1], "\(counted)")
        serve.signal(SIGTERM)
        #expect(await serve.waitForExit() == 0)
        let outcomes = try await ServeProcessTests.scalar(
            database, "SELECT string_agg(outcome || ' ' || coalesce(status::text, 'none'), ',' ORDER BY outcome) FROM apns_audit")
        #expect(outcomes == "failed none,success 200,success 200", "one row per send, as answered: \(outcomes)")
    }

    @Test("no descriptor left: a send needing a new APNs connection is answered 502 and audited, the audit writer's reconnect by name spools, /healthz answers, no listener spins on a connection waiting in its backlog; once descriptors are back, those connections are served (the ingress' though its kept-alive client stays busy), sends reach APNs, every row lands and the drain exits 0")
    func noDescriptorLeft() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        // By name: the audit writer's reconnect looks "localhost" up, a pipe per lookup.
        let byName = database.replacingOccurrences(of: "@127.0.0.1:", with: "@localhost:")
        let setup = try await APNsHTTP2FaultProcessTests.setUp(name: "descriptors", databaseURL: byName)
        defer { Task { await setup.cleanUp() } }
        let mock = try Self.goAwayAfterEveryStream(beside: setup)
        defer { mock.stop() }
        // Production too, by name (another origin, so another pool), first
        // used at the limit: its pool is made then.
        let yaml = try String(contentsOfFile: setup.config, encoding: .utf8)
            .replacingOccurrences(
                of: "development: 127.0.0.1:\(setup.mock.port)",
                with: "development: 127.0.0.1:\(mock.port)\n    production: localhost:\(mock.port)")
            .replacingOccurrences(of: "environments: [development]", with: "environments: [development, production]")
            .replacingOccurrences(of: setup.mock.certificateFile, with: mock.certificateFile)
        try yaml.write(toFile: setup.config, atomically: true, encoding: .utf8)

        let serve = try setup.serve()
        let port = try await serve.port(after: "apns-relay ingress on")
        let (h2Port, metricsPort) = try await APNsHTTP2FaultProcessTests.Setup.ports(serve)
        let key = TestRelay.keys["backend"]!
        let client = KeepAliveClient(port: port)
        func send(_ index: Int, environment: String = "development") async -> (status: Int, body: String) {
            let body = TestRelay.send(token: TestRelay.token(index))
                .replacingOccurrences(of: #""environment":"development""#, with: #""environment":"\#(environment)""#)
            return await offPoolThread { client.post("/v1/send", key: key, body: Array(body.utf8)) }
        }
        func rows() async throws -> Int { Int(try await ServeProcessTests.scalar(byName, "SELECT count(*) FROM apns_audit")) ?? -1 }

        let first = await send(1)
        #expect(first.status == 200, "\(first)")
        #expect(await eventually(30) { (try? await rows()) == 1 }, "the first row is in Postgres: the writer's connection is up")
        let soft = try await Self.openFileLimit(of: serve.pid)

        try await Self.setOpenFileLimit(of: serve.pid, soft: "3")
        _ = try await ServeProcessTests.scalar(
            database, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        let cpuBefore = try Self.cpuSeconds(of: serve.pid)
        let clock = ContinuousClock()
        let restStarted = clock.now
        // The HTTP/2 listener has a connection it cannot accept: it waits in the backlog.
        let waiting = try Self.connection(to: h2Port)
        defer { close(waiting) }
        // So has the metrics listener, with no connection open: libmicrohttpd's
        // accept, failing there, tried again at once ("will try busy waiting").
        let waitingScrape = try Self.connection(to: metricsPort)
        defer { close(waitingScrape) }
        // And the ingress, with a connection open (the kept-alive client's):
        // libmicrohttpd stops accepting there until one of its connections closes.
        let waitingClient = KeepAliveClient.connectLoopback(port: port, receiveTimeoutSeconds: 10)
        guard waitingClient >= 0 else { throw TestRelayError("connect: \(String(cString: strerror(errno)))") }
        defer { close(waitingClient) }

        // To production, whose connection pool (and the loop thread its
        // connections share) is made now, without a descriptor for its eventfd.
        let second = await send(2, environment: "production")
        #expect(second.status == 502 && second.body.contains("open files"), "\(second)")
        #expect(await offPoolThread { client.get("/healthz") }.status == 200)
        let log = setup.errors
        // Twice: the reconnect backs off and tries again (and the spin check gets a longer span).
        let lookupFailed = await eventually(30) {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").components(separatedBy: "no descriptor for the lookup").count > 2
        }
        #expect(lookupFailed, "the audit writer's reconnects found no descriptor for their lookup, and said so")
        let cpu = try Self.cpuSeconds(of: serve.pid) - cpuBefore
        let elapsed = (clock.now - restStarted) / .seconds(1)
        // A listener polling a socket it cannot accept on burns a whole core for the time.
        #expect(cpu < elapsed / 2, "\(cpu) s of CPU in \(elapsed) s at the limit")
        print("at the limit: \(cpu) s of CPU in \(elapsed) s")
        #expect(serve.exitStatus == nil, "serve is still running")

        try await Self.setOpenFileLimit(of: serve.pid, soft: soft)
        // The same pool: its loop, made without a descriptor, is not kept.
        let third = await send(3, environment: "production")
        #expect(third.status == 200, "\(third)")
        // The connection that waited is accepted and served now.
        #expect(await offPoolThread { Self.answersPreface(on: waiting) }, "the HTTP/2 listener took the connection that waited")
        #expect(await offPoolThread { Self.answersGet("/metrics", on: waitingScrape) }, "the metrics listener took the connection that waited")
        // The kept-alive client is busy and never idles out: the answer above
        // closed its connection, so the ingress accepts again at once (within
        // the 10 s receive timeout, not at the client's 30 s idle timeout).
        #expect(await offPoolThread { Self.answersGet("/healthz", on: waitingClient) }, "the ingress took the client that waited")
        #expect(await offPoolThread { client.get("/healthz") }.status == 200, "the kept-alive client reconnected")
        #expect(await eventually(60) { (try? await rows()) == 3 }, "every row reached Postgres once descriptors were back")
        try await Self.expectOneFailedTwoSucceeded(setup, metricsPort: metricsPort, serve: serve, database: byName)
        // The spool's next segment could not be opened either: its write
        // failed with every batch, and said so once (not once a batch), then
        // once more when the rows it kept were settled.
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        let failed = lines.filter { $0.contains("audit spool write failed") }
        let ended = lines.filter { $0.contains("audit spool writable again") || $0.contains("reached Postgres") }
        #expect(failed.count == 1, "\(failed.count) lines: \(failed.prefix(3))")
        let failures = ended.first.map { Self.number(after: #""failed_writes":""#, in: String($0)) } ?? 0
        #expect(ended.count == 1 && failures > 1, "the end of the failures, with more failed writes than lines: \(ended)")
    }

    /// How many descriptors `pid` holds (/proc/PID/fd).
    static func openDescriptors(of pid: Int32) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).count
    }

    /// Whether `fd` becomes readable within `seconds` (an answer, or the peer's close).
    static func readable(_ fd: Int32, within seconds: Double) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, Int32(seconds * 1000)) > 0
    }

    @Test("started under a hard open-file limit of 96: serve says the limit is below what its listeners need; idle connections take every descriptor without a spin and a new client waits; once they close, it is answered, sends are answered and audited, and the drain exits 0")
    func startedUnderALowLimit() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let setup = try await APNsHTTP2FaultProcessTests.setUp(name: "low-limit", databaseURL: database)
        defer { Task { await setup.cleanUp() } }
        let limit = 96
        let serve = try RelayProcess(arguments: ["serve", "--config", setup.config], standardError: setup.errors, openFileLimit: limit)
        let port = try await serve.port(after: "apns-relay ingress on")
        let (_, metricsPort) = try await APNsHTTP2FaultProcessTests.Setup.ports(serve)
        // The warning names the limit and what the listeners need: the ingress', the HTTP/2 ingress' 1024, and the rest.
        // Waited for: the log's own thread writes it, maybe after the port lines.
        var warning: Substring?
        _ = await eventually(30) {
            warning = ((try? String(contentsOfFile: setup.errors, encoding: .utf8)) ?? "").split(separator: "\n")
                .first { $0.contains("open-file limit is below what the ingress connection limits need") }
            return warning != nil
        }
        #expect(warning.map { Self.number(after: #""open_file_limit":""#, in: String($0)) } == limit, "\(String(describing: warning))")
        #expect(warning.map { Self.number(after: #""apns_ingress_connections":""#, in: String($0)) } == 1024, "\(String(describing: warning))")
        let key = TestRelay.keys["backend"]!
        let client = KeepAliveClient(port: port)
        func send(_ index: Int) async -> Int {
            await offPoolThread { client.post("/v1/send", key: key, body: Array(TestRelay.send(token: TestRelay.token(index)).utf8)) }.status
        }
        #expect(await send(1) == 200)

        // Idle connections until the relay holds every descriptor it may: the
        // rest wait in the backlog (libmicrohttpd stops accepting until one closes).
        var flood: [Int32] = []
        defer { flood.forEach { close($0) } }
        for _ in 0..<limit { flood.append(try Self.connection(to: port)) }
        #expect(await eventually(30) { Self.openDescriptors(of: serve.pid) >= limit }, "the relay holds \(Self.openDescriptors(of: serve.pid)) of \(limit)")
        let waiting = KeepAliveClient.connectLoopback(port: port, receiveTimeoutSeconds: 10)
        guard waiting >= 0 else { throw TestRelayError("connect: \(String(cString: strerror(errno)))") }
        defer { close(waiting) }
        #expect(Self.sendGet("/healthz", on: waiting))
        let cpuBefore = try Self.cpuSeconds(of: serve.pid)
        let clock = ContinuousClock()
        let started = clock.now
        // A second of nothing: the client is not accepted while no descriptor is free.
        #expect(!(await offPoolThread { Self.readable(waiting, within: 1) }), "a client was answered with every descriptor taken")
        let cpu = try Self.cpuSeconds(of: serve.pid) - cpuBefore
        let elapsed = (clock.now - started) / .seconds(1)
        #expect(cpu < elapsed / 2, "\(cpu) s of CPU in \(elapsed) s at the limit")
        print("started at a limit of \(limit), flooded: \(cpu) s of CPU in \(elapsed) s")
        #expect(await send(2) == 200, "a connection kept alive from before is still served")

        flood.forEach { close($0) }
        flood = []
        // Answered once descriptors are free: within the receive timeout
        // (10 s), before the flood's connections would have timed out idle (30 s).
        let answer = await offPoolThread { Self.answerHead(on: waiting) }
        #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
        #expect(await send(3) == 200)
        let scrape = try await setup.relay.curl("GET", "/metrics", key: nil, base: "http://127.0.0.1:\(metricsPort)")
        #expect(OutcomeAgreementTests.sums(scrape.body, "apns_relay_sends_total", by: "outcome") == ["success": 3])
        serve.signal(SIGTERM)
        #expect(await serve.waitForExit() == 0)
        let rows = try await ServeProcessTests.scalar(database, "SELECT count(*) FROM apns_audit WHERE outcome = 'success'")
        #expect(rows == "3", "one row per answered send: \(rows)")
    }

    @Test("no descriptor left while the ingress' only connection idles: once descriptors are back, a client that waited is answered within seconds (the idle connection is closed so that libmicrohttpd accepts again), not at the 30 s idle timeout; the idle client's next send finds its connection closed and goes through on a new one, once")
    func descriptorsBackUnderIdleConnections() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let setup = try await APNsHTTP2FaultProcessTests.setUp(name: "idle-limit", databaseURL: database)
        defer { Task { await setup.cleanUp() } }
        let serve = try setup.serve()
        let port = try await serve.port(after: "apns-relay ingress on")
        let key = TestRelay.keys["backend"]!
        let client = KeepAliveClient(port: port)
        func send(_ index: Int) async -> Int {
            await offPoolThread { client.post("/v1/send", key: key, body: Array(TestRelay.send(token: TestRelay.token(index)).utf8)) }.status
        }
        #expect(await send(1) == 200)
        let soft = try await Self.openFileLimit(of: serve.pid)

        try await Self.setOpenFileLimit(of: serve.pid, soft: "3")
        // With the kept-alive client's connection open, libmicrohttpd stops
        // accepting until one of its connections closes; that one now idles.
        let waiting = KeepAliveClient.connectLoopback(port: port, receiveTimeoutSeconds: 10)
        guard waiting >= 0 else { throw TestRelayError("connect: \(String(cString: strerror(errno)))") }
        defer { close(waiting) }
        #expect(Self.sendGet("/healthz", on: waiting))
        #expect(!(await offPoolThread { Self.readable(waiting, within: 1) }), "a client was answered with no descriptor left")

        try await Self.setOpenFileLimit(of: serve.pid, soft: soft)
        let clock = ContinuousClock()
        let restored = clock.now
        // Within the receive timeout (10 s), long before the idle connection's timeout (30 s).
        let answer = await offPoolThread { Self.answerHead(on: waiting) }
        #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
        print("descriptors back under an idle connection: the waiting client answered after \((clock.now - restored) / .seconds(1)) s")
        // The idle connection was the one closed, as an idle timeout closes
        // it: its client finds it ended (the request written to it is never
        // read) and sends again on a new one.
        let stale = await send(2)
        #expect(stale == 0, "the kept-alive connection was still open: \(stale)")
        #expect(await send(2) == 200, "the idle client reconnected")
        serve.signal(SIGTERM)
        #expect(await serve.waitForExit() == 0)
        let rows = try await ServeProcessTests.scalar(database, "SELECT count(*) FROM apns_audit WHERE outcome = 'success'")
        #expect(rows == "2", "one row per answered send: \(rows)")
    }

    @Test("the OTLP exporter at the open-file limit: its export fails naming the cause (socket: Too many open files), the batch is counted dropped, sends are still answered; once descriptors are back, spans reach the collector again, and received + dropped == spans made")
    func exporterAtTheLimit() async throws {
        guard let setup = try await TraceExportProcessTests.start("descriptors") else { return }
        let (relay, receiver, serve) = (setup.relay, setup.receiver, setup.serve)
        defer { Task { _ = await receiver.stop(); await relay.stop() } }
        let metricsPort = try await serve.port(after: "apns-relay metrics on")
        let key = TestRelay.keys["backend"]!
        let client = KeepAliveClient(port: setup.port)
        func send(_ index: Int) async -> Int {
            await offPoolThread { client.post("/v1/send", key: key, body: Array(TestRelay.send(token: TestRelay.token(index)).utf8)) }.status
        }
        // Each single send makes three spans: ingress.request, apns.send, apns.attempt.
        #expect(await send(1) == 200)
        #expect(await eventually(30) { receiver.lineCount == 3 }, "the first send's spans were exported")
        let soft = try await Self.openFileLimit(of: serve.pid)

        try await Self.setOpenFileLimit(of: serve.pid, soft: "3")
        #expect(await send(2) == 200, "a send on an open connection is answered at the limit")
        let failed = await eventually(30) {
            ((try? String(contentsOfFile: setup.standardError, encoding: .utf8)) ?? "").split(separator: "\n")
                .contains { $0.contains("span export failed") && $0.contains("socket: Too many open files") }
        }
        #expect(failed, "the export failure is logged with its cause")
        try await Self.setOpenFileLimit(of: serve.pid, soft: soft)

        #expect(await send(3) == 200)
        var dropped: [String: Int] = [:]
        let accounted = await eventually(30) {
            guard let scrape = try? await relay.curl("GET", "/metrics", key: nil, base: "http://127.0.0.1:\(metricsPort)") else { return false }
            dropped = TraceExportProcessTests.droppedSpans(scrape.body)
            return receiver.lineCount + dropped.values.reduce(0, +) == 9 && receiver.lineCount > 3
        }
        #expect(accounted, "received \(receiver.lineCount) + dropped \(dropped) != 9 spans made, or none exported after the limit")
        // The second send's spans, lost with their batch (one of them may
        // have ended after its answer, in a later batch, failed or not).
        #expect((1...3).contains(dropped["export_failed"] ?? 0) && dropped["queue_full", default: 0] == 0, "\(dropped)")
        print("exporter at the limit: \(receiver.lineCount) spans received, dropped \(dropped)")
        serve.signal(SIGTERM)
        #expect(await serve.waitForExit() == 0)
    }
}
