import Foundation
@testable import HTTP2
import Synchronization
import Testing

@Suite("HTTP/2 connection pool")
struct PoolTests {
    func makePool(
        _ local: LocalServer, sharesOneThread: Bool = false, size: Int = 2, events: EventLog? = nil, _ configure: (inout HTTP2Connection.Configuration) -> Void = { _ in }
    ) -> HTTP2Pool {
        var connection = HTTP2Connection.Configuration(host: "127.0.0.1", port: local.server.port)
        connection.tls = TLSClientConfiguration(caFile: local.certificate.certificate)
        configure(&connection)
        var configuration = HTTP2Pool.Configuration(connection: connection)
        configuration.size = size
        configuration.sharesOneThread = sharesOneThread
        return HTTP2Pool(configuration: configuration, observer: events?.observer)
    }

    @Test("opens lazily, at most `size` connections, spreading load", arguments: [false, true])
    func lazyAndBounded(sharesOneThread: Bool) async throws {
        let requests = HeldRequests()
        let local = try LocalServer(handler: requests.handler)
        defer { local.stop() }
        let pool = makePool(local, sharesOneThread: sharesOneThread)
        #expect(pool.openConnections == 0)
        for _ in 0..<5 { #expect(try await pool.send(HTTP2Request(method: "GET", path: "/one")).status == 200) }
        #expect(pool.openConnections == 1, "sequential requests reuse the idle connection")
        // Held by the server, all 200 are in flight at once however the tasks
        // are scheduled (answered after 20 ms, a late task could find the
        // first connection idle every time and no second one would open).
        let statuses = await withTaskGroup(of: String.self) { group in
            for index in 0..<200 {
                group.addTask {
                    (try? await pool.send(HTTP2Request(method: "GET", path: "/hold/\(index)", timeout: guardTimeout)).status).map(String.init) ?? "failed"
                }
            }
            await waitUntil("the server holds all 200 requests") { requests.held.count == 200 }
            #expect(pool.openConnections == 2)
            #expect(Set(requests.held.map(\.connectionID)) == [1, 2], "both connections carry requests")
            requests.release()
            var all: [String] = []
            for await status in group { all.append(status) }
            return all
        }
        #expect(statuses.allSatisfy { $0 == "200" })
        #expect(pool.openConnections == 2)
        #expect(local.server.acceptedConnections == 2)
        await pool.close()
    }

    @Test("after a graceful GOAWAY, later requests move to a new connection without errors", arguments: [false, true])
    func goAwayMovesTraffic(sharesOneThread: Bool) async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let events = EventLog()
        let pool = makePool(local, sharesOneThread: sharesOneThread, size: 1, events: events)
        #expect(try await pool.send(HTTP2Request(method: "GET", path: "/fault/goaway-graceful")).status == 200)
        for index in 0..<20 {
            #expect(try await pool.send(HTTP2Request(method: "GET", path: "/after/\(index)")).status == 200)
        }
        #expect(local.server.acceptedConnections == 2)
        #expect(events.all.contains(.goaway))
        await pool.close()
    }

    @Test("requests caught by an abrupt GOAWAY are resent on a new connection and succeed", arguments: [false, true])
    func abruptGoAwayResends(sharesOneThread: Bool) async throws {
        // The first /fault request drops its connection abruptly; resent, it
        // is answered. The first connection holds /hold requests, so they are
        // in flight when that happens; later connections answer them.
        let fired = Atomic<Bool>(false)
        let requests = HeldRequests { $0.path.hasPrefix("/hold") && $0.connectionID == 1 }
        let local = try LocalServer { request, responder in
            if request.path == "/fault", !fired.exchange(true, ordering: .relaxed) {
                responder.goAway(graceful: false, response: nil)
            } else {
                requests.handler(request, responder)
            }
        }
        defer { local.stop() }
        let pool = makePool(local, sharesOneThread: sharesOneThread, size: 1)
        _ = try await pool.send(HTTP2Request(method: "GET", path: "/warm"))
        let held = (0..<5).map { index in
            Task { try await pool.send(HTTP2Request(method: "GET", path: "/hold/\(index)", timeout: guardTimeout)) }
        }
        await waitUntil("the first connection holds all five") { requests.held.count == 5 }
        #expect(try await pool.send(HTTP2Request(method: "GET", path: "/fault")).status == 200)
        for task in held { #expect(try await task.value.status == 200) }
        #expect(local.server.acceptedConnections >= 2)
        for index in 0..<5 {
            let carriers = requests.arrived.filter { $0.path == "/hold/\(index)" }.map(\.connectionID)
            #expect(carriers.count == 2 && carriers[0] == 1 && carriers[1] > 1, "/hold/\(index): held on connection 1, resent: \(carriers)")
        }
        await pool.close()
    }

    @Test("a server that GOAWAYs every request sees it exactly 1 + maximumUnprocessedResends times, then the send fails unprocessed", arguments: [false, true])
    func goAwayResendBound(sharesOneThread: Bool) async throws {
        let transmissions = Atomic<Int>(0)
        let local = try LocalServer { _, responder in
            transmissions.add(1, ordering: .relaxed)
            responder.goAway(graceful: false, response: nil)
        }
        defer { local.stop() }
        let pool = makePool(local, sharesOneThread: sharesOneThread)
        #expect(pool.configuration.maximumUnprocessedResends == 5)
        await #expect {
            try await pool.send(HTTP2Request(method: "GET", path: "/refused", timeout: guardTimeout))
        } throws: { error in
            guard let error = error as? HTTP2Error else { return false }
            return error.code == .unprocessed && error.message.hasSuffix("(sent 6 time(s), never processed)")
        }
        #expect(transmissions.load(ordering: .relaxed) == 1 + pool.configuration.maximumUnprocessedResends)
        #expect(local.server.acceptedConnections == 1 + pool.configuration.maximumUnprocessedResends, "each resend on a fresh connection")
        await pool.close()
    }

    @Test("an idle connection closes after the idle timeout; the next request opens a new one", arguments: [false, true])
    func idleClose(sharesOneThread: Bool) async throws {
        let requests = HeldRequests()
        let local = try LocalServer(handler: requests.handler)
        defer { local.stop() }
        let events = EventLog()
        let pool = makePool(local, sharesOneThread: sharesOneThread, events: events) { $0.idleTimeout = 0.3 }
        #expect(try await pool.send(HTTP2Request(method: "GET", path: "/one")).status == 200)
        await waitUntil("the idle connection closes") { events.all.contains(.closed) }
        #expect(pool.openConnections == 0)
        #expect(events.all == [.opened, .closed])
        // The server holds /two: while it is in flight the new connection is
        // busy and cannot idle out, however late this task checks (an answered
        // /two left it 0.3 s before a second .closed, which a loaded run overran).
        async let two = pool.send(HTTP2Request(method: "GET", path: "/hold/two", timeout: guardTimeout))
        await waitUntil("the server holds /two") { !requests.held.isEmpty }
        #expect(requests.held.map(\.connectionID) == [2])
        #expect(local.server.acceptedConnections == 2)
        #expect(events.all == [.opened, .closed, .opened])
        #expect(pool.openConnections == 1)
        requests.release()
        #expect(try await two.status == 200)
        await pool.close()
        #expect(events.all == [.opened, .closed, .opened, .closed])
    }

    @Test("close() refuses new requests, lets in-flight ones finish, and forces the rest after the drain timeout", arguments: [false, true])
    func closeDrainsThenForces(sharesOneThread: Bool) async throws {
        let resets = ResetLog()
        let requests = HeldRequests()
        let local = try LocalServer(resets: resets, handler: requests.handler)
        defer { local.stop() }
        let pool = makePool(local, sharesOneThread: sharesOneThread, size: 1)
        let finishing = Task { try await pool.send(HTTP2Request(method: "GET", path: "/hold/finishing", timeout: guardTimeout)) }
        let stuck = Task { try await pool.send(HTTP2Request(method: "GET", path: "/hold/stuck", timeout: guardTimeout)) }
        let canary = Task { try await pool.send(HTTP2Request(method: "GET", path: "/hold/canary", timeout: guardTimeout)) }
        await waitUntil("the server holds all three requests") { requests.held.count == 3 }
        let connection = try #require(pool.connections.first)
        // /hold/finishing is answered once the connection is draining (see
        // `drainSignal`), well inside the drain timeout; /hold/stuck never is.
        drainSignal(connection, cancelling: canary, resets: resets) { requests.release { $0.path == "/hold/finishing" } }
        let clock = ContinuousClock()
        let start = clock.now
        await pool.close(drainTimeout: 1)
        #expect(clock.now - start >= .seconds(1), "the unanswered request holds the drain until its timeout")
        #expect(try await finishing.value.status == 200)
        await #expect {
            _ = try await stuck.value
        } throws: { error in
            let error = error as! HTTP2Error
            return error.code == .connection && error.message.contains("drain timeout")
        }
        await #expect { _ = try await canary.value } throws: { ($0 as? HTTP2Error)?.code == .cancelled }
        await #expect {
            try await pool.send(HTTP2Request(method: "GET", path: "/late"))
        } throws: { ($0 as? HTTP2Error)?.code == .closed }
        #expect(requests.arrived.map(\.path).sorted() == ["/hold/canary", "/hold/finishing", "/hold/stuck"])
        #expect(local.server.acceptedConnections == 1)
    }

    @Test("a refused origin is a typed error and reconnects back off")
    func refusedOrigin() async throws {
        let refusing = try RefusingPort()
        defer { refusing.close() }
        var connection = HTTP2Connection.Configuration(host: "127.0.0.1", port: refusing.port)
        connection.connectTimeout = 1
        var configuration = HTTP2Pool.Configuration(connection: connection)
        configuration.reconnectMinimumDelay = 0.2
        let events = EventLog()
        let pool = HTTP2Pool(configuration: configuration, observer: events.observer)
        await #expect { try await pool.send(HTTP2Request(method: "GET", path: "/")) } throws: { ($0 as? HTTP2Error)?.code == .connectFailed }
        await #expect { try await pool.send(HTTP2Request(method: "GET", path: "/")) } throws: { ($0 as? HTTP2Error)?.code == .connectFailed }
        // Measured between the refusals themselves: the test task may resume
        // late on a loaded machine, after most of the backoff has passed.
        let refusals = events.times(of: .refused)
        try #require(refusals.count == 2)
        #expect(refusals[1] - refusals[0] >= .milliseconds(160), "the second attempt waits for the backoff (0.2 s - 20%)")
        #expect(pool.consecutiveConnectFailures == 2)
        await pool.close()
    }

    @Test("backoff grows per failed connection, not per request that was waiting on it")
    func backoffCountsConnections() async throws {
        let refusing = try RefusingPort()
        defer { refusing.close() }
        var connection = HTTP2Connection.Configuration(host: "127.0.0.1", port: refusing.port)
        connection.connectTimeout = 1
        var configuration = HTTP2Pool.Configuration(connection: connection)
        configuration.size = 1
        configuration.reconnectMinimumDelay = 0.2
        configuration.reconnectMaximumDelay = 60
        let events = EventLog()
        let pool = HTTP2Pool(configuration: configuration, observer: events.observer)
        // Twenty requests share the first connection attempt and its failure.
        let codes = await withTaskGroup(of: HTTP2Error.Code?.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    do throws(HTTP2Error) {
                        _ = try await pool.send(HTTP2Request(method: "GET", path: "/"))
                        return nil
                    } catch { return error.code }
                }
            }
            var all: [HTTP2Error.Code?] = []
            for await code in group { all.append(code) }
            return all
        }
        #expect(codes.allSatisfy { $0 == .connectFailed })
        // Counted per request, this would be 20 and the next attempt 0.2 s × 2^19
        // (capped at 60 s) away; per connection it is one per refusal.
        let refusals = events.all.filter { $0 == .refused }.count
        #expect(pool.consecutiveConnectFailures == refusals)
        #expect(refusals < 20, "the concurrent requests shared connection attempts")
        await pool.close()
    }
}
