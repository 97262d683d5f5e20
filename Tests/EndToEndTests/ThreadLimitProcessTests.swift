import Foundation
import MockAPNs
import Testing
import TestSupport

/// `serve` out of threads: a container's pids limit, or `RLIMIT_NPROC`,
/// reached while it serves. Foundation's `Thread.start()` ignores a failed
/// `pthread_create`: before, a connection the HTTP/2 ingress accepted then
/// stayed open with nobody serving it, counted against
/// `apns_ingress.max_connections` for good (the listener took no client
/// again once that many had come at the limit), and an APNs connection
/// whose thread never ran left its send waiting. Now the relay's threads
/// start through `DetachedThread`: the accepted connection is closed at
/// once and the accept loop rests, the APNs connection fails like a refused
/// connect (the send is answered 502, naming the cause), and once threads
/// are free again both work.
///
/// The relay runs as `nobody` (`setpriv`): the kernel does not hold root to
/// `RLIMIT_NPROC`. Its soft limit is lowered to 1 on the running process
/// with `prlimit`: no new thread at all, whichever end meanwhile, while
/// the threads it has go on working.
@Suite("serve out of threads, as a process", .serialized)
struct ThreadLimitProcessTests {
    /// `nobody` on Debian; any unprivileged id would do.
    static let unprivileged: Int32 = 65534

    /// `prlimit` (util-linux) with `arguments`, as the relay's own user: a
    /// process may change another's limits only as its user, or with
    /// CAP_SYS_RESOURCE, which a container's root may lack.
    static func prlimit(_ arguments: [String]) async throws -> String {
        let user = "\(unprivileged)"
        let (status, output) = try await ProcessRunner.runOffPool(
            ["setpriv", "--reuid=\(user)", "--regid=\(user)", "--clear-groups", "prlimit"] + arguments)
        guard status == 0 else { throw TestRelayError("prlimit: \(output)") }
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Sets `pid`'s soft RLIMIT_NPROC, leaving the hard one.
    static func setThreadLimit(of pid: Int32, soft: String) async throws {
        _ = try await prlimit(["--pid", "\(pid)", "--nproc=\(soft):"])
    }

    /// `pid`'s soft RLIMIT_NPROC as prlimit prints it.
    static func threadLimit(of pid: Int32) async throws -> String {
        try await prlimit(["--pid", "\(pid)", "--nproc", "--output", "SOFT", "--noheadings"])
    }

    /// The names of `pid`'s threads (/proc/PID/task/*/comm).
    static func threadNames(of pid: Int32) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []).compactMap { task in
            (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// What the relay did with a connection whose client sent the HTTP/2
    /// preface: "served" (its SETTINGS came), "closed" (EOF or a reset), or
    /// "silent" (nothing within `seconds`: accepted and left unserved).
    static func fate(of fd: Int32, within seconds: Double) -> String {
        // A send refused (the relay closed first) is a close too.
        _ = DescriptorLimitProcessTests.sendPreface(on: fd)
        guard DescriptorLimitProcessTests.readable(fd, within: seconds) else { return "silent" }
        return DescriptorLimitProcessTests.receivesSettings(on: fd) ? "served" : "closed"
    }

    @Test("out of threads: connections the HTTP/2 ingress accepts are closed at once (none left open against its connection cap), a send needing a new APNs connection is answered 502 naming the cause and audited, /healthz answers; once threads are free, the ingress serves as many connections as its cap, sends reach APNs, and the drain exits 0")
    func outOfThreads() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        // setpriv's change of user needs root (scripts/test and CI run as root).
        guard getuid() == 0 else {
            print("ThreadLimitProcessTests: skipped, not root (setpriv cannot change the user)")
            return
        }
        let database = try await ServeProcessTests.freshDatabase(url)
        let setup = try await APNsHTTP2FaultProcessTests.setUp(name: "threads", databaseURL: database)
        defer { Task { await setup.cleanUp() } }
        // Each send needs a new APNs connection, and its thread.
        let mock = try DescriptorLimitProcessTests.goAwayAfterEveryStream(beside: setup)
        defer { mock.stop() }
        let cap = 4
        let yaml = try String(contentsOfFile: setup.config, encoding: .utf8)
            .replacingOccurrences(of: "development: 127.0.0.1:\(setup.mock.port)", with: "development: 127.0.0.1:\(mock.port)")
            .replacingOccurrences(of: setup.mock.certificateFile, with: mock.certificateFile)
            .replacingOccurrences(of: "  tls: false", with: "  tls: false\n  max_connections: \(cap)")
        try yaml.write(toFile: setup.config, atomically: true, encoding: .utf8)
        // For the unprivileged user: the directory (its spool goes there),
        // the provider key (mode 0600) and a copy of the binary (the build
        // may sit where it cannot reach, under /root). Not the rest: the
        // in-process relay's own spool changes meanwhile.
        let binary = setup.relay.directory + "/apns-relay"
        try FileManager.default.copyItem(atPath: RelayProcess.binary, toPath: binary)
        for path in [setup.relay.directory, setup.relay.keyPath, binary] {
            try FileManager.default.setAttributes([.ownerAccountID: Self.unprivileged, .groupOwnerAccountID: Self.unprivileged], ofItemAtPath: path)
        }

        let serve = try RelayProcess(
            arguments: ["serve", "--config", setup.config], standardError: setup.errors, user: Self.unprivileged, binary: binary)
        let port = try await serve.port(after: "apns-relay ingress on")
        let (h2Port, metricsPort) = try await APNsHTTP2FaultProcessTests.Setup.ports(serve)
        let key = TestRelay.keys["backend"]!
        let client = KeepAliveClient(port: port)
        func send(_ index: Int) async -> (status: Int, body: String) {
            await offPoolThread { client.post("/v1/send", key: key, body: Array(TestRelay.send(token: TestRelay.token(index)).utf8)) }
        }
        func connections(_ count: Int) throws -> [Int32] {
            try (0..<count).map { _ in try DescriptorLimitProcessTests.connection(to: h2Port) }
        }

        #expect(await send(1).status == 200)
        // One HTTP/2 connection set up before the limit, kept open through it.
        let kept = try connections(1)
        defer { kept.forEach { close($0) } }
        #expect(await offPoolThread { Self.fate(of: kept[0], within: 10) } == "served")
        let soft = try await Self.threadLimit(of: serve.pid)
        // Both of Swift's pool threads alive when the limit falls (Dispatch's
        // default-QoS root queue, "com.apple.root.default-qos" cut to 15
        // bytes): Dispatch may end one that idles, and out of threads the
        // next job that asks for one waits until a thread starts (the
        // runtime's, not the relay's to change). A burst of probes runs both.
        let poolThreads = await eventually(30) {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<16 { group.addTask { _ = await offPoolThread { KeepAliveClient(port: port).get("/healthz") } } }
            }
            return Self.threadNames(of: serve.pid).filter { $0.hasSuffix("default-qos") }.count >= 2
        }
        #expect(poolThreads, "Swift's pool threads: \(Self.threadNames(of: serve.pid))")
        let threads = Self.threadNames(of: serve.pid).sorted()

        try await Self.setThreadLimit(of: serve.pid, soft: "1")
        // More connections than the cap leaves room for: each one's set-up thread cannot start.
        let atTheLimit = try connections(cap + 2)
        defer { atTheLimit.forEach { close($0) } }
        let fates = await offPoolThread { atTheLimit.map { Self.fate(of: $0, within: 10) } }
        #expect(fates.allSatisfy { $0 == "closed" }, "each connection closed at once, none left open unserved: \(fates)")
        #expect(await offPoolThread { client.get("/healthz") }.status == 200)
        let second = await send(2)
        #expect(second.status == 502 && second.body.contains("no thread"), "\(second)")
        #expect(serve.exitStatus == nil, "serve is still running")

        try await Self.setThreadLimit(of: serve.pid, soft: soft)
        // As many connections as the cap leaves room for beside the kept one:
        // none of those closed at the limit holds a place.
        let after = try connections(cap - 1)
        defer { after.forEach { close($0) } }
        let served = await offPoolThread { after.map { Self.fate(of: $0, within: 10) } }
        #expect(served.allSatisfy { $0 == "served" }, "\(served)")
        let third = await send(3)
        #expect(third.status == 200, "\(third)")
        // Each connection closed at the limit is counted, under its reason.
        let refusals = try await setup.relay.curl("GET", "/metrics", key: nil, base: "http://127.0.0.1:\(metricsPort)")
        let refused = OutcomeAgreementTests.sums(refusals.body, "apns_relay_apns_ingress_connections_refused_total", by: "reason")
        #expect(
            refused == ["threads": cap + 2, "descriptors": 0, "max_connections": 0, "max_connections_per_client": 0, "stopping": 0],
            "\(refused)")
        try await DescriptorLimitProcessTests.expectOneFailedTwoSucceeded(setup, metricsPort: metricsPort, serve: serve, database: database)
        print("out of threads (\(threads.count) threads when the limit fell: \(threads)): connections at the limit \(fates), after \(served); the send at the limit: \(second.status) \(second.body.prefix(160))")
    }
}
