import Foundation
@testable import HTTP2
import RelayBasics
import Testing

/// The connect's host lookup runs off the connection's thread: a resolver
/// that does not answer holds no request past its own deadline and no
/// connect past its timeout.
@Suite("HTTP/2 client against a resolver that does not answer")
struct HostLookupConnectTests {
    /// A connection to `local` whose lookups are `lookup`, never the resolver's.
    func connection(to local: LocalServer, lookup: HostLookup, connectTimeout: Double = guardTimeout, events: EventLog? = nil) -> HTTP2Connection {
        local.connection({
            $0.connectTimeout = connectTimeout
            $0.lookUp = { _, _ in lookup }
        }, events: events?.observer)
    }

    /// What the resolver would give for 127.0.0.1, found without one.
    func loopback(port: Int) throws -> HostLookup.Outcome {
        try #require(HostLookup.start(host: "127.0.0.1", port: port).outcome)
    }

    @Test("while the lookup hangs, a request times out on its own deadline; the connect is still coming up")
    func requestDeadlineDuringLookup() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let lookup = HostLookup.pendingForTesting(host: "apns.test", port: local.server.port)
        let connection = connection(to: local, lookup: lookup)
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/", timeout: 0.3))
        } throws: { error in
            let error = error as! HTTP2Error
            return error.code == .timeout && !error.requestWritten && error.message.hasSuffix("within 0.3 s")
        }
        #expect(connection.state == .connecting)
        await connection.close(drainTimeout: 0.1)
        #expect(connection.state == .closed)
    }

    @Test("a lookup that never ends fails the connect at its timeout, with a message that names the resolver")
    func connectTimeoutDuringLookup() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let lookup = HostLookup.pendingForTesting(host: "apns.test", port: local.server.port)
        let connection = connection(to: local, lookup: lookup, connectTimeout: 0.5)
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/", timeout: guardTimeout))
        } throws: { error in
            let error = error as! HTTP2Error
            return error.code == .connectFailed && error.message.contains("the resolver did not answer within 0.5 s")
        }
        #expect(connection.state == .closed)
    }

    @Test("an answer that comes late is used: the request queued meanwhile is sent")
    func lateAnswer() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let lookup = HostLookup.pendingForTesting(host: "apns.test", port: local.server.port)
        let connection = connection(to: local, lookup: lookup)
        let sent = Task { try await connection.send(HTTP2Request(method: "GET", path: "/late", timeout: guardTimeout)) }
        await waitUntil("the request is queued") { connection.load > 0 }
        #expect(connection.state == .connecting)
        lookup.finishForTesting(try loopback(port: local.server.port))
        let response = try await sent.value
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self).contains("/late"))
        await connection.close(drainTimeout: 1)
    }

    @Test("a failed lookup fails the connect with the resolver's message")
    func failedLookup() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let lookup = HostLookup.pendingForTesting(host: "apns.test", port: local.server.port)
        lookup.finishForTesting(.failed("Name or service not known"))
        let connection = connection(to: local, lookup: lookup)
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/", timeout: guardTimeout))
        } throws: { error in
            let error = error as! HTTP2Error
            return error.code == .connectFailed && error.message == "cannot resolve 127.0.0.1: Name or service not known"
        }
    }

    @Test("a host given by name is looked up on the lookup's thread and connected")
    func realName() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        // localhost is in /etc/hosts on every machine this runs on: no DNS query.
        let connection = local.connection { $0.host = "localhost" }
        let response = try await connection.send(HTTP2Request(method: "GET", path: "/named", timeout: guardTimeout))
        #expect(response.status == 200)
        await connection.close(drainTimeout: 1)
    }
}
