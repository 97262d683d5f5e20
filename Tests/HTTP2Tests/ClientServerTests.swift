import Foundation
@testable import HTTP2
import Synchronization
import Testing
import TestSupport
import RelayBasics

/// Our client against our server, for the behaviours a mock APNs needs.
struct LocalServer {
    let server: HTTP2Server
    let certificate: TestCertificate

    init(maxConcurrentStreams: UInt32 = 1000, resets: ResetLog? = nil, handler: @escaping HTTP2ServerHandler) throws {
        certificate = try TestCertificate()
        var configuration = HTTP2Server.Configuration(tls: TLSServerConfiguration(certificateChainFile: certificate.certificate, privateKeyFile: certificate.key))
        configuration.maxConcurrentStreams = maxConcurrentStreams
        configuration.onStreamReset = resets?.observer
        server = try HTTP2Server(configuration: configuration, handler: handler)
    }

    /// A client connection to this server, trusting its certificate;
    /// `configure` adjusts the settings, `loop` and `tuning` its thread.
    func connection(
        _ configure: (inout HTTP2Connection.Configuration) -> Void = { _ in }, events: HTTP2EventObserver? = nil,
        loop: ConnectionLoop = ConnectionLoop(), tuning: HTTP2Connection.Tuning = HTTP2Connection.Tuning()
    ) -> HTTP2Connection {
        var configuration = HTTP2Connection.Configuration(host: "127.0.0.1", port: server.port)
        configuration.tls = TLSClientConfiguration(caFile: certificate.certificate)
        configure(&configuration)
        return HTTP2Connection(configuration: configuration, observer: events, loop: loop, tuning: tuning)
    }

    func stop() {
        server.stop()
        certificate.remove()
    }
}

/// Echoes method, path and body; paths starting with /fault/ trigger faults.
let echoHandler: HTTP2ServerHandler = { request, responder in
    switch request.path {
    case "/fault/ignore": responder.ignore()
    case "/fault/reset": responder.resetConnection()
    case "/fault/goaway-graceful": responder.goAway(graceful: true, response: HTTP2Response(status: 200, body: Array("last".utf8)))
    case "/fault/goaway-abrupt": responder.goAway(graceful: false, response: nil)
    case let path where path.hasPrefix("/slow/"):
        responder.respond(HTTP2Response(status: 200, body: Array(path.utf8)), delayMilliseconds: Int(path.dropFirst(6)) ?? 0)
    default:
        let headers = [HTTPHeader("x-method", request.method), HTTPHeader("x-connection", String(request.connectionID))]
        responder.respond(HTTP2Response(status: request.path == "/created" ? 201 : 200, headers: headers, body: request.body.isEmpty ? Array(request.path.utf8) : request.body))
    }
}

/// Waits until `condition` holds, checking every 2 ms (``eventually``, whose
/// budget counts only the time this task got to run); records a test
/// failure instead of hanging.
func waitUntil(_ what: String, timeout: Double = 30, _ condition: () -> Bool) async {
    if !(await eventually(timeout, every: .milliseconds(2), condition)) {
        Issue.record("gave up after checking for \(timeout) s until \(what)")
    }
}

/// Collects connection events.
final class EventLog: Sendable {
    private let events = Mutex<[(event: HTTP2ConnectionEvent, at: ContinuousClock.Instant)]>([])
    var all: [HTTP2ConnectionEvent] { events.withLock { $0.map(\.event) } }
    /// When each `event` was reported, on the reporting thread: free of the
    /// delays a test task sees waiting for a cooperative thread.
    func times(of event: HTTP2ConnectionEvent) -> [ContinuousClock.Instant] {
        events.withLock { $0.filter { $0.event == event }.map(\.at) }
    }
    var observer: HTTP2EventObserver { { _, event in self.events.withLock { $0.append((event, ContinuousClock.now)) } } }
}

/// The RST_STREAM frames our server received: (stream id, error code).
final class ResetLog: Sendable {
    private let resets = Mutex<[(stream: Int32, code: UInt32)]>([])
    var all: [(stream: Int32, code: UInt32)] { resets.withLock { $0 } }
    var observer: @Sendable (Int, Int32, UInt32) -> Void { { _, stream, code in self.resets.withLock { $0.append((stream, code)) } } }
}

/// HTTP/2 error code CANCEL (RFC 9113 §7).
let cancelCode: UInt32 = 8

/// Seconds for timeouts that only guard against a hang (a request the test
/// itself ends by cancelling, releasing or closing): far beyond the ~35 s a
/// loaded full run has kept a test task waiting for a thread, so they never
/// decide an outcome.
let guardTimeout = 120.0

/// A server handler that records every request and holds back the answer to
/// those whose path starts with /hold until the test releases them; anything
/// else goes to `echoHandler`. A held request stays in flight for exactly as
/// long as the test needs, however slow the machine: no answer is timed.
final class HeldRequests: Sendable {
    private struct State {
        var arrived: [HTTP2ServerRequest] = []
        var held: [(request: HTTP2ServerRequest, responder: HTTP2Responder)] = []
        /// Once open, /hold requests are answered at once.
        var open = false
    }
    private let state = Mutex(State())
    /// Which requests to hold; by default those whose path starts with /hold.
    private let shouldHold: @Sendable (HTTP2ServerRequest) -> Bool

    init(holding shouldHold: @escaping @Sendable (HTTP2ServerRequest) -> Bool = { $0.path.hasPrefix("/hold") }) {
        self.shouldHold = shouldHold
    }

    var handler: HTTP2ServerHandler {
        { request, responder in
            let hold = self.state.withLock { state in
                state.arrived.append(request)
                guard !state.open, self.shouldHold(request) else { return false }
                state.held.append((request, responder))
                return true
            }
            if !hold { echoHandler(request, responder) }
        }
    }

    /// Every request the server received, in arrival order.
    var arrived: [HTTP2ServerRequest] { state.withLock { $0.arrived } }
    /// Requests held unanswered now.
    var held: [HTTP2ServerRequest] { state.withLock { $0.held.map(\.request) } }

    /// Answers the held requests `which` picks (all by default) with 200 and their path.
    func release(_ which: (HTTP2ServerRequest) -> Bool = { _ in true }) {
        let released = state.withLock { state in
            defer { state.held.removeAll { which($0.request) } }
            return state.held.filter { which($0.request) }
        }
        for (request, responder) in released { responder.respond(HTTP2Response(status: 200, body: Array(request.path.utf8))) }
    }

    /// Releases everything held and answers later requests at once.
    func open() {
        state.withLock { $0.open = true }
        release()
    }
}

/// A server handler that answers every request after `holdMilliseconds` and
/// keeps the most streams it held at once.
final class StreamPeak: Sendable {
    private let active = Atomic<Int>(0)
    private let highest = Atomic<Int>(0)
    let holdMilliseconds: Int

    init(holdMilliseconds: Int = 20) { self.holdMilliseconds = holdMilliseconds }

    /// The most requests the server held at once.
    var peak: Int { highest.load(ordering: .relaxed) }

    func handle(_ responder: HTTP2Responder) {
        let now = active.wrappingAdd(1, ordering: .relaxed).newValue
        _ = highest.max(now, ordering: .relaxed)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(holdMilliseconds)) { [self] in
            active.subtract(1, ordering: .relaxed)
            responder.respond(HTTP2Response(status: 200))
        }
    }
}

/// Sends `count` GETs of `path` at once; each one's status, -1 for a failure.
/// The waits in line count against each request's deadline: a generous one,
/// so only a refusal or a lost request can make one fail.
func sendAtOnce(_ count: Int, path: String = "/x", on connection: HTTP2Connection) async -> [Int] {
    await withTaskGroup(of: Int.self) { group in
        for _ in 0..<count {
            group.addTask { (try? await connection.send(HTTP2Request(method: "GET", path: path, timeout: guardTimeout)).status) ?? -1 }
        }
        var all: [Int] = []
        for await status in group { all.append(status) }
        return all
    }
}

extension HTTP2Connection {
    /// close() was called: the connection takes no new requests and drains.
    var isDraining: Bool { core.handOff.shared.withLock { $0.closeRequested } }
}

/// Runs `then` once `connection`'s own thread has taken its close request
/// and carried on: when close() has been called, `canary` (a request in
/// flight on the connection) is cancelled, and the thread takes that
/// cancellation in the same snapshot as the close request or a later one; its
/// RST_STREAM reaching the server shows the thread went on serving after it
/// saw the close. Threads of their own watch both steps, so the drain timeout
/// never races this test task's turn on a cooperative thread.
func drainSignal<T>(_ connection: HTTP2Connection, cancelling canary: Task<T, any Error>, resets: ResetLog, then: @escaping @Sendable () -> Void) {
    onOwnThread(when: { connection.isDraining }) { canary.cancel() }
    onOwnThread(when: { !resets.all.isEmpty }, then)
}

/// Runs `action` on a thread of its own as soon as `condition` holds, checking
/// every millisecond for at most `timeout` seconds. For a reaction that must
/// follow a change in the client promptly: a test task can wait many seconds
/// for a cooperative thread in a loaded run, a thread of its own cannot.
func onOwnThread(when condition: @escaping @Sendable () -> Bool, timeout: Double = guardTimeout, _ action: @escaping @Sendable () -> Void) {
    Thread.detachNewThread {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while !condition() {
            guard ContinuousClock.now < deadline else { return }
            usleep(1000)
        }
        action()
    }
}

@Suite("HTTP/2 client against our server")
struct ClientServerTests {
    @Test("requests and responses round-trip with headers and bodies")
    func roundTrip() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let events = EventLog()
        let connection = local.connection(events: events.observer)
        let response = try await connection.send(HTTP2Request(method: "POST", path: "/created", headers: [HTTPHeader("apns-topic", "a.b")], body: Array("payload".utf8)))
        #expect(response.status == 201)
        #expect(response.header("x-method") == "POST")
        #expect(response.body == Array("payload".utf8))
        await connection.close()
        #expect(events.all == [.opened, .closed])
    }

    @Test("concurrent requests whose bodies span many DATA frames each reach the handler whole, with their own headers")
    func interleavedBodies() async throws {
        // Bodies of 40 KB: nghttp2 sends each in 16 KB frames and takes turns
        // between streams, so the server sees frames of one stream between
        // another's headers and its end (its current-stream slot parks and
        // resumes requests).
        let local = try LocalServer { request, responder in
            let tag = request.headers.value(of: "x-tag") ?? "none"
            responder.respond(HTTP2Response(status: 200, headers: [HTTPHeader("x-tag", tag)], body: request.body))
        }
        defer { local.stop() }
        let connection = local.connection()
        let answers = try await withThrowingTaskGroup(of: (Int, HTTP2Response).self) { group in
            for index in 0..<24 {
                let body = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
                let request = HTTP2Request(method: "POST", path: "/echo/\(index)", headers: [HTTPHeader("x-tag", "t\(index)")], body: body)
                group.addTask { (index, try await connection.send(request)) }
            }
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        for index in 0..<24 {
            let response = try #require(answers[index])
            #expect(response.header("x-tag") == "t\(index)")
            #expect(response.body == (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) })
        }
        await connection.close()
    }

    @Test("a request with no answer times out with a typed error that says it went out whole, RST_STREAM(CANCEL) reaches the server, the connection lives on")
    func timeout() async throws {
        let resets = ResetLog()
        let requests = HeldRequests()
        let local = try LocalServer(resets: resets, handler: requests.handler)
        defer { local.stop() }
        let connection = local.connection()
        // Up and with the server's SETTINGS in, so the request goes out at
        // once: its deadline, counted from send(), then covers no set-up.
        #expect(try await connection.send(HTTP2Request(method: "GET", path: "/warm")).status == 200)
        // The server has the request (its handler holds it): the error must
        // say the server may have acted on it, so a once-only send is not resent.
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/hold/forever", timeout: 1))
        } throws: { ($0 as? HTTP2Error)?.code == .timeout && ($0 as? HTTP2Error)?.requestWritten == true }
        // A POST with a body too: written means its last DATA frame left.
        await #expect {
            try await connection.send(HTTP2Request(method: "POST", path: "/hold/body", body: Array(repeating: 7, count: 3000), timeout: 1))
        } throws: { ($0 as? HTTP2Error)?.code == .timeout && ($0 as? HTTP2Error)?.requestWritten == true }
        await waitUntil("the server sees both streams reset") { resets.all.count == 2 }
        #expect(resets.all.map(\.stream) == requests.held.map(\.streamID))
        #expect(resets.all.map(\.code) == [cancelCode, cancelCode])
        #expect(try await connection.send(HTTP2Request(method: "GET", path: "/after")).status == 200)
        await connection.close()
    }

    @Test("stop(grace:) still answers the streams the server took, then closes once they are answered (a PING acknowledged, then GOAWAY)")
    func gracefulStop() async throws {
        let requests = HeldRequests()
        let local = try LocalServer(handler: requests.handler)
        defer { local.stop() }
        let connection = local.connection()
        #expect(try await connection.send(HTTP2Request(method: "GET", path: "/warm")).status == 200)
        async let first = connection.send(HTTP2Request(method: "GET", path: "/hold/1"))
        async let second = connection.send(HTTP2Request(method: "GET", path: "/hold/2"))
        await waitUntil("both requests are held") { requests.held.count == 2 }
        // The stop reaches the connection before the answers (one inbox, in
        // order). This client reads answers after a GOAWAY, so it cannot
        // tell the order apart: httpx can, in APNsHTTP2FaultProcessTests'
        // drain cases (they failed 1 run in 3 to 6 on a busy machine when
        // the GOAWAY went out with the answers).
        local.server.stop(grace: 60)
        requests.release()
        #expect(try await first.status == 200)
        #expect(try await second.status == 200)
        // Not the 60 s grace: the connection goes once its answers are read.
        await waitUntil("the server's connection closes") { local.server.connectionsAnswering == 0 }
        await connection.close()
    }

    @Test("cancelling the waiting task sends RST_STREAM(CANCEL) for its stream and throws cancelled")
    func cancellation() async throws {
        let resets = ResetLog()
        let requests = HeldRequests()
        let local = try LocalServer(resets: resets, handler: requests.handler)
        defer { local.stop() }
        let connection = local.connection()
        let task = Task { try await connection.send(HTTP2Request(method: "GET", path: "/hold/forever", timeout: guardTimeout)) }
        // Wait until the server holds the request, then cancel.
        await waitUntil("the server has the request") { !requests.held.isEmpty }
        task.cancel()
        let result = await task.result
        guard case .failure(let error as HTTP2Error) = result else { Issue.record("expected cancellation, got \(result)"); return }
        #expect(error.code == .cancelled)
        #expect(connection.load == 0)
        await waitUntil("the server sees the stream reset") { !resets.all.isEmpty }
        #expect(resets.all.map(\.stream) == requests.held.map(\.streamID))
        #expect(resets.all.map(\.code) == [cancelCode])
        await connection.close()
    }

    @Test("a task cancelled before it sends fails with cancelled, and the request never reaches the server")
    func cancelledBeforeSend() async throws {
        let paths = Mutex<[String]>([])
        let local = try LocalServer { request, responder in
            paths.withLock { $0.append(request.path) }
            echoHandler(request, responder)
        }
        defer { local.stop() }
        let connection = local.connection()
        #expect(try await connection.send(HTTP2Request(method: "GET", path: "/warm")).status == 200)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await connection.send(HTTP2Request(method: "GET", path: "/fault/ignore", timeout: 30))
        }
        let result = await task.result
        guard case .failure(let error as HTTP2Error) = result else { Issue.record("expected cancellation, got \(result)"); return }
        #expect(error.code == .cancelled)
        // One connection, in order: once /after is answered, a request sent
        // before it would have been seen.
        #expect(try await connection.send(HTTP2Request(method: "GET", path: "/after")).status == 200)
        #expect(paths.withLock { $0 } == ["/warm", "/after"])
        #expect(connection.load == 0)
        await connection.close()
    }

    @Test("graceful GOAWAY: the last stream is answered, a later request is refused as never sent")
    func gracefulGoAway() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let events = EventLog()
        let connection = local.connection(events: events.observer)
        let last = try await connection.send(HTTP2Request(method: "GET", path: "/fault/goaway-graceful"))
        #expect(last.status == 200)
        #expect(last.body == Array("last".utf8))
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/after"))
        } throws: { ($0 as? HTTP2Error)?.code == .notSent }
        #expect(events.all.contains(.goaway))
    }

    @Test("abrupt GOAWAY: in-flight streams above last-stream-id are unprocessed")
    func abruptGoAway() async throws {
        let requests = HeldRequests()
        let local = try LocalServer(handler: requests.handler)
        defer { local.stop() }
        let connection = local.connection()
        // Held by the server: only the GOAWAY can end it (a 10 s answer could
        // come first if this task resumed late enough).
        let held = Task { try await connection.send(HTTP2Request(method: "GET", path: "/hold/forever", timeout: guardTimeout)) }
        await waitUntil("the server holds the request") { !requests.held.isEmpty }
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/fault/goaway-abrupt"))
        } throws: { ($0 as? HTTP2Error)?.code == .unprocessed }
        await #expect {
            _ = try await held.value
        } throws: { ($0 as? HTTP2Error)?.code == .unprocessed }
    }

    @Test("a TCP reset mid-stream fails in-flight requests with a connection error that says the request went out whole")
    func reset() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let connection = local.connection()
        // The server read the request before it reset the connection.
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/fault/reset"))
        } throws: { ($0 as? HTTP2Error)?.code == .connection && ($0 as? HTTP2Error)?.requestWritten == true }
        #expect(connection.state == .closed)
    }

    @Test("the server's small MAX_CONCURRENT_STREAMS is honoured; excess waits, nothing is refused")
    func smallStreamLimit() async throws {
        let streams = StreamPeak()
        let local = try LocalServer(maxConcurrentStreams: 3) { _, responder in streams.handle(responder) }
        defer { local.stop() }
        let connection = local.connection()
        #expect(await sendAtOnce(30, on: connection) == Array(repeating: 200, count: 30))
        #expect(streams.peak <= 3)
        await connection.close()
    }

    @Test("with our default cap the stream limit is the server's SETTINGS: 1000 streams at once, not a fixed 900")
    func defaultCapFollowsPeer() async throws {
        let requests = HeldRequests()
        let local = try LocalServer(maxConcurrentStreams: 1000, handler: requests.handler)
        defer { local.stop() }
        let connection = local.connection()
        _ = try await connection.send(HTTP2Request(method: "GET", path: "/warm"))
        let tasks = (0..<1000).map { index in
            Task { try await connection.send(HTTP2Request(method: "GET", path: "/hold/\(index)", timeout: guardTimeout)) }
        }
        // All 1000 reach the server before any is answered: none waits for a stream.
        await waitUntil("the server holds 1000 streams") { requests.held.count == 1000 }
        requests.open()
        for task in tasks { #expect(try await task.value.status == 200) }
        await connection.close()
    }

    @Test("a server that lowers MAX_CONCURRENT_STREAMS mid-connection is honoured for every later stream; nothing fails")
    func peerLowersStreamLimit() async throws {
        let streams = StreamPeak()
        let local = try LocalServer(maxConcurrentStreams: 1000) { request, responder in
            guard request.path == "/lower" else { return streams.handle(responder) }
            // The new SETTINGS go out before this answer: the client has them when it reads it.
            responder.changeMaxConcurrentStreams(to: 2)
            responder.respond(HTTP2Response(status: 200))
        }
        defer { local.stop() }
        let connection = local.connection()
        #expect(try await connection.send(HTTP2Request(method: "GET", path: "/lower")).status == 200)
        // A client that kept the first limit would open up to 30 streams: the
        // server would hold more than 2 or refuse the excess (a failed send here).
        #expect(await sendAtOnce(30, on: connection) == Array(repeating: 200, count: 30))
        #expect(streams.peak <= 2, "the client opened \(streams.peak) streams at once after the server allowed 2")
        await connection.close()
    }

    @Test("a full waiting queue fails at once with queueFull")
    func queueFull() async throws {
        let requests = HeldRequests()
        let local = try LocalServer(maxConcurrentStreams: 1, handler: requests.handler)
        defer { local.stop() }
        let connection = local.connection { $0.queueCapacity = 2; $0.maxConcurrentStreams = 1 }
        try await Self.expectQueueFull(connection, requests)
    }

    @Test("the queue bound counts the server's stream limit, not only ours")
    func queueFullUnderPeerLimit() async throws {
        let requests = HeldRequests()
        let local = try LocalServer(maxConcurrentStreams: 1, handler: requests.handler)
        defer { local.stop() }
        // Our cap stays at its default (1000): only the server's SETTINGS say 1.
        let connection = local.connection { $0.queueCapacity = 2 }
        try await Self.expectQueueFull(connection, requests)
    }

    /// With one stream in flight (the server holds it) and a queue of 2 full,
    /// the next request fails at once with queueFull and never reaches the
    /// server; the held and queued ones then complete.
    static func expectQueueFull(_ connection: HTTP2Connection, _ requests: HeldRequests) async throws {
        // Establish the connection so its limits are known.
        _ = try await connection.send(HTTP2Request(method: "GET", path: "/warm"))
        // The server holds the one in flight, so the queue stays full until released.
        let tasks = (0..<3).map { index in
            Task { try await connection.send(HTTP2Request(method: "GET", path: "/hold/\(index)", timeout: guardTimeout)) }
        }
        await waitUntil("one request is held and two wait") { connection.load == 3 && requests.held.count == 1 }
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/one-too-many"))
        } throws: { ($0 as? HTTP2Error)?.code == .queueFull }
        requests.open()
        for task in tasks { #expect(try await task.value.status == 200) }
        #expect(!requests.arrived.map(\.path).contains("/one-too-many"))
        await connection.close()
    }

    @Test("close drains in-flight requests, then refuses new ones")
    func drainingClose() async throws {
        let resets = ResetLog()
        let requests = HeldRequests()
        let local = try LocalServer(resets: resets, handler: requests.handler)
        defer { local.stop() }
        let connection = local.connection()
        async let inFlight = connection.send(HTTP2Request(method: "GET", path: "/hold/drain", timeout: guardTimeout))
        let canary = Task { try await connection.send(HTTP2Request(method: "GET", path: "/hold/canary", timeout: guardTimeout)) }
        await waitUntil("the server holds both requests") { requests.held.count == 2 }
        // See `drainSignal`: /hold/drain is answered only after the connection
        // thread has taken the close request and carried on.
        drainSignal(connection, cancelling: canary, resets: resets) { requests.release { $0.path == "/hold/drain" } }
        await connection.close(drainTimeout: 5)
        #expect(try await inFlight.status == 200)
        await #expect { _ = try await canary.value } throws: { ($0 as? HTTP2Error)?.code == .cancelled }
        #expect(resets.all.map(\.code) == [cancelCode])
        await #expect(throws: HTTP2Error.self) { try await connection.send(HTTP2Request(method: "GET", path: "/late")) }
    }

    @Test("the drain and idle timeouts fire when due, not at the loop's next wake-up up to a second later")
    func timersWakeTheLoop() async throws {
        let requests = HeldRequests()
        let local = try LocalServer(handler: requests.handler)
        defer { local.stop() }
        // Timed on the connection thread (its events), or from just before a
        // call this task makes while running: a late-resuming test task cannot
        // stretch either. Before the poll() timeout counted these deadlines, both
        // took 1.0 s, the loop's cap; on time they take 0.1 s plus one wake-up.
        let idleEvents = EventLog()
        let idle = local.connection({ $0.idleTimeout = 0.1 }, events: idleEvents.observer)
        #expect(try await idle.send(HTTP2Request(method: "GET", path: "/warm")).status == 200)
        await waitUntil("the idle connection closes") { idleEvents.all.contains(.closed) }
        // From the connection coming up: one round trip, then idle.
        let opened = try #require(idleEvents.times(of: .opened).first)
        let idleClosed = try #require(idleEvents.times(of: .closed).first)
        #expect(idleClosed - opened < .milliseconds(900), "idle for 0.1 s, closed \(idleClosed - opened) after opening")

        let drainEvents = EventLog()
        let draining = local.connection(events: drainEvents.observer)
        let stuck = Task { try await draining.send(HTTP2Request(method: "GET", path: "/hold/stuck", timeout: guardTimeout)) }
        await waitUntil("the server holds the request") { !requests.held.isEmpty }
        let closing = ContinuousClock.now
        await draining.close(drainTimeout: 0.1)
        let drainClosed = try #require(drainEvents.times(of: .closed).first)
        #expect(drainClosed - closing < .milliseconds(900), "a 0.1 s drain ended after \(drainClosed - closing)")
        await #expect { _ = try await stuck.value } throws: { ($0 as? HTTP2Error)?.message.contains("drain timeout") == true }
    }

    @Test("a request sent after the connection failed to come up gets that failure, not a resendable error")
    func sendAfterSetupFailure() async throws {
        let refusing = try RefusingPort()
        defer { refusing.close() }
        var configuration = HTTP2Connection.Configuration(host: "127.0.0.1", port: refusing.port)
        configuration.connectTimeout = 1
        let connection = HTTP2Connection(configuration: configuration)
        await waitUntil("the connect attempt has failed") { connection.state == .closed }
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/"))
        } throws: { ($0 as? HTTP2Error)?.code == .connectFailed }
    }

    @Test("a server without h2 in ALPN is a clear error")
    func noHTTP2() async throws {
        let certificate = try TestCertificate()
        defer { certificate.remove() }
        var tls = TLSServerConfiguration(certificateChainFile: certificate.certificate, privateKeyFile: certificate.key)
        tls.offerHTTP2 = false
        let server = try HTTP2Server(configuration: .init(tls: tls), handler: echoHandler)
        defer { server.stop() }
        var configuration = HTTP2Connection.Configuration(host: "127.0.0.1", port: server.port)
        configuration.tls = TLSClientConfiguration(caFile: certificate.certificate)
        let connection = HTTP2Connection(configuration: configuration)
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/"))
        } throws: { error in
            let error = error as! HTTP2Error
            return error.code == .noHTTP2 && error.message.contains("did not agree to HTTP/2")
        }
    }
}

@Suite("HTTP/2 client against a silent peer")
struct SilentPeerTests {
    @Test("a TLS peer that never sends SETTINGS cannot hang a request: it times out")
    func noSettings() async throws {
        // openssl s_server speaks TLS with ALPN h2 but no HTTP/2 at all.
        let server = try OpenSSLServer(alpn: "h2")
        defer { server.stop() }
        let connection = server.connection()
        // The request's own deadline ends it, while it still waits for a
        // stream: that is the message. Nothing else could end it with this
        // code (the missed PING, 40 s on, would fail it as unprocessed). No
        // wall-clock bound: this task can resume tens of seconds late in the
        // full parallel suite, which says nothing about the connection.
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/", timeout: 0.3))
        } throws: { error in
            let error = error as! HTTP2Error
            // Never on a stream: nothing of it left, so any send may resend it.
            return error.code == .timeout && error.message.contains("no stream to") && error.message.hasSuffix("within 0.3 s")
                && !error.requestWritten
        }
        await connection.close(drainTimeout: 0.1)
    }

    func hungHandshake(_ listener: SilentTCPListener, events: EventLog? = nil) -> HTTP2Connection {
        var configuration = HTTP2Connection.Configuration(host: "127.0.0.1", port: listener.port)
        configuration.connectTimeout = guardTimeout
        return HTTP2Connection(configuration: configuration, observer: events?.observer)
    }

    @Test("while the TLS handshake hangs, a request still times out on its own deadline, and close() gives the handshake up")
    func timeoutDuringHandshake() async throws {
        let listener = try SilentTCPListener()
        defer { listener.close() }
        let events = EventLog()
        let connection = hungHandshake(listener, events: events)
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/", timeout: 0.3))
        } throws: { ($0 as? HTTP2Error)?.code == .timeout && ($0 as? HTTP2Error)?.requestWritten == false }
        #expect(connection.state == .connecting)
        let closing = ContinuousClock.now
        await connection.close(drainTimeout: 0.1)
        #expect(connection.state == .closed)
        // Far below the handshake timeout it would otherwise wait out. Timed
        // from the call to the connection thread's .closed event: this task
        // may resume from close() much later in a loaded run.
        let closed = try #require(events.times(of: .closed).first)
        #expect(closed - closing < .seconds(30), "close() gave the handshake up")
        #expect(events.all == [.closed])
    }

    @Test("cancelling while the TLS handshake hangs ends the request at once")
    func cancelDuringHandshake() async throws {
        let listener = try SilentTCPListener()
        defer { listener.close() }
        let connection = hungHandshake(listener)
        let task = Task { try await connection.send(HTTP2Request(method: "GET", path: "/", timeout: guardTimeout)) }
        await waitUntil("the request is queued") { connection.load > 0 }
        task.cancel()
        let result = await task.result
        guard case .failure(let error as HTTP2Error) = result else { Issue.record("expected cancellation, got \(result)"); return }
        #expect(error.code == .cancelled)
        #expect(connection.load == 0)
        #expect(connection.state == .connecting)
        await connection.close(drainTimeout: 0.1)
        #expect(connection.state == .closed)
    }
}
