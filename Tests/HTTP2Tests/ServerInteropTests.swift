import Foundation
import HTTP2
import Testing

/// Our server against nghttp and h2load, HTTP/2 clients nobody here wrote.
@Suite("HTTP/2 server against nghttp and h2load")
struct ServerInteropTests {
    @Test("nghttp: a POST with headers and body gets our answer")
    func nghttp() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let bodyFile = local.certificate.directory + "/body.json"
        try #"{"aps":{"alert":"hi"}}"#.write(toFile: bodyFile, atomically: true, encoding: .utf8)
        let output = try Command.run([
            "nghttp", "-v", "--no-dep", "-H", "apns-topic: com.example.app", "-d", bodyFile,
            "https://127.0.0.1:\(local.server.port)/created",
        ])
        #expect(output.contains(":status: 201"))
        #expect(output.contains("x-method: POST"))
        #expect(output.contains(#"{"aps":{"alert":"hi"}}"#))
    }

    @Test("h2load: 2,000 requests over 2 connections and 50 streams, all 2xx")
    func h2load() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let output = try Command.run(["h2load", "-n", "2000", "-c", "2", "-m", "50", "https://127.0.0.1:\(local.server.port)/hello"])
        #expect(output.contains("2000 succeeded, 0 failed, 0 errored"), "\(output)")
        #expect(output.contains("status codes: 2000 2xx"), "\(output)")
        #expect(local.server.acceptedConnections == 2)
    }
}

@Suite("HTTP/2 keep-alive")
struct KeepAliveTests {
    @Test("a peer that stops answering PINGs is detected: in-flight requests fail with pingTimeout, the connection closes")
    func pingTimeout() async throws {
        let server = try NGHTTPDInteropTests.Server()
        defer { server.stop() }
        let events = EventLog()
        var configuration = HTTP2Connection.Configuration(host: "127.0.0.1", port: server.port)
        configuration.tls = TLSClientConfiguration(caFile: server.certificate.certificate)
        configuration.pingInterval = 0.2
        // The request below must reach the connection before the missed ACK
        // fails it. Between SIGSTOP and send() there is no suspension point,
        // only the OS's scheduling: a second (not 0.4 s) is ample margin.
        configuration.pingTimeout = 1
        let connection = HTTP2Connection(configuration: configuration, observer: events.observer)
        #expect(try await connection.send(HTTP2Request(method: "GET", path: "/hello.txt")).status == 200)
        // Freeze the server process: the socket stays open but nothing answers.
        server.process.signal(SIGSTOP)
        defer { server.process.signal(SIGCONT) }
        // The request's own timeout is far away: only the missed PING ACK can end it.
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/hello.txt", timeout: 60))
        } throws: { ($0 as? HTTP2Error)?.code == .pingTimeout }
        #expect(connection.state == .closed)
        #expect(events.all.contains(.pingTimeout))
    }
}
