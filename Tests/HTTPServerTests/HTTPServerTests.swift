import Foundation
@testable import HTTPServer
import Synchronization
import Testing
import RelayBasics

/// A server with a few routes for the tests.
func makeServer(_ configure: (inout HTTPServer.Configuration) -> Void = { _ in }, extra: (inout Router) -> Void = { _ in })
    throws -> HTTPServer
{
    var router = Router()
    router.add("GET", "/hello/{name}") { request in
        .text(200, "hello \(request.pathParameters["name"] ?? "?") \(request.query["greeting"] ?? "")")
    }
    router.add("POST", "/echo") { request in
        .json(201, request.body, headers: [HTTPHeader("x-body-bytes", String(request.body.count)), HTTPHeader("x-content-type", request.header("content-type") ?? "")])
    }
    router.add("GET", "/big") { _ in .text(200, String(repeating: "metric_line 1\n", count: 2000)) }
    router.add("GET", "/slow") { _ in
        try? await Task.sleep(for: .milliseconds(50))
        return .text(200, "slow")
    }
    extra(&router)
    var configuration = HTTPServer.Configuration()
    configure(&configuration)
    return try HTTPServer(configuration: configuration, router: router)
}

@Suite("HTTP server on libmicrohttpd")
struct HTTPServerTests {
    @Test("routes with path parameters and decoded query strings")
    func routing() async throws {
        let server = try makeServer()
        let base = "http://127.0.0.1:\(server.port)"
        let hello = try await Curl.request("\(base)/hello/world?greeting=good%20day")
        #expect(hello.status == 200)
        #expect(hello.body == "hello world good day")
        #expect(try await Curl.request("\(base)/nowhere").status == 404)
        let wrongMethod = try await Curl.request("\(base)/echo")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.headers["allow"] == "POST")
        await server.stop()
    }

    @Test("request bodies arrive whole; over the limit is 413")
    func bodies() async throws {
        let server = try makeServer { $0.maximumBodyBytes = 64 * 1024 }
        let base = "http://127.0.0.1:\(server.port)"
        let payload = String(repeating: "{\"k\":1}", count: 5000)  // 35 KB, several upload chunks
        let echoed = try await Curl.request("\(base)/echo", ["-H", "content-type: application/json", "--data-binary", payload])
        #expect(echoed.status == 201)
        #expect(echoed.headers["x-body-bytes"] == String(payload.utf8.count))
        #expect(echoed.body == payload)
        let tooBig = String(repeating: "x", count: 70 * 1024)
        let rejected = try await Curl.request("\(base)/echo", ["--data-binary", tooBig])
        #expect(rejected.status == 413)
        #expect(rejected.body.contains("PayloadTooLarge"))
        await server.stop()
    }

    @Test("gzip for clients that accept it, identity otherwise")
    func gzip() async throws {
        let server = try makeServer()
        let url = "http://127.0.0.1:\(server.port)/big"
        let compressed = try await Curl.request(url, ["--compressed"])
        #expect(compressed.headers["content-encoding"] == "gzip")
        #expect(compressed.body == String(repeating: "metric_line 1\n", count: 2000))
        let plain = try await Curl.request(url)
        #expect(plain.headers["content-encoding"] == nil)
        #expect(plain.body.utf8.count == 28_000)
        await server.stop()
    }

    @Test("many concurrent async handlers: each connection suspended and resumed")
    func concurrency() async throws {
        let server = try makeServer()
        let urls = (0..<64).flatMap { _ in ["-o", "/dev/null", "http://127.0.0.1:\(server.port)/slow"] }
        let (output, code) = try await Curl.run(["--parallel", "--parallel-max", "64", "--write-out", "%{http_code}\\n"] + urls)
        #expect(code == 0)
        let statuses = output.split(separator: "\n")
        #expect(statuses.count == 64)
        #expect(statuses.allSatisfy { $0 == "200" })
        await server.stop()
    }

    /// A server whose `GET /held` waits until `release` is called, and the
    /// answer of one such request, returned once its handler runs.
    private func serverHoldingOneRequest() async throws
        -> (server: HTTPServer, base: String, release: @Sendable () -> Void, held: Task<Curl.Result, any Error>)
    {
        let release = AsyncStream<Void>.makeStream()
        let entered = AsyncStream<Void>.makeStream()
        let server = try makeServer(extra: { router in
            router.add("GET", "/held") { _ in
                entered.continuation.yield()
                for await _ in release.stream { break }
                return .text(200, "released")
            }
        })
        let base = "http://127.0.0.1:\(server.port)"
        let held = Task { try await Curl.request("\(base)/held") }
        var iterator = entered.stream.makeAsyncIterator()
        _ = await iterator.next()
        return (server, base, { release.continuation.yield() }, held)
    }

    @Test("stop drains a running handler, then refuses new connections")
    func gracefulStop() async throws {
        let (server, base, release, held) = try await serverHoldingOneRequest()
        #expect(server.inFlight == 1)
        async let stopped: Void = server.stop(drainTimeout: 10)
        release()
        let response = try await held.value
        await stopped
        #expect(response.status == 200)
        #expect(response.body == "released")
        let (_, code) = try await Curl.run(["--max-time", "5", "\(base)/hello/x"])
        #expect(code != 0, "the stopped server must refuse connections")
    }

    @Test("once it stops accepting, a new connection is refused at once while a running request is still answered")
    func newConnectionsRefusedWhileDraining() async throws {
        let (server, base, release, held) = try await serverHoldingOneRequest()
        server.stopAccepting()
        // curl's exit 7 is "could not connect"; a backlog nobody accepts
        // would instead run into --max-time (28).
        let (_, code) = try await Curl.run(["--max-time", "20", "\(base)/hello/x"])
        #expect(code == 7, "a new connection during the drain must be refused, not left in the backlog (curl exit \(code))")
        release()
        let response = try await held.value
        #expect(response.status == 200)
        await server.stop(drainTimeout: 5)
    }

    @Test("a handler still running at the drain timeout is answered 503 and the server stops (libmicrohttpd would abort)")
    func stopPastDrainTimeout() async throws {
        let entered = AsyncStream<Void>.makeStream()
        let server = try makeServer(extra: { router in
            router.add("GET", "/forever") { _ in
                entered.continuation.yield()
                // Never answers in time: the stop must not wait for it or crash on it.
                try? await Task.sleep(for: .seconds(30))
                return .text(200, "too late")
            }
        })
        let base = "http://127.0.0.1:\(server.port)"
        async let held = Curl.request("\(base)/forever")
        var iterator = entered.stream.makeAsyncIterator()
        _ = await iterator.next()
        await server.stop(drainTimeout: 0.2)
        let response = try await held
        #expect(response.status == 503)
        #expect(response.body.contains("Draining"))
    }

    @Test("a client that stops sending mid-request is disconnected after the timeout")
    func slowClient() async throws {
        let server = try makeServer { $0.connectionTimeoutSeconds = 1 }
        let socket = openTCPSocket()
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = server.port.bigEndian
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(connected == 0)
        let partial = Array("GET /hello/x HTTP/1.1\r\nHost: x\r\n".utf8)
        _ = partial.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, 0) }
        // A generous receive timeout only bounds a broken server; a working one
        // closes the connection after ~1 s and recv returns 0.
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 512)
        let received = recv(socket, &buffer, buffer.count, 0)
        let failure = received < 0 ? errno : 0
        // Closed by the server: end of stream (0) or a reset. The receive
        // timeout running out instead is EAGAIN: the server kept it open.
        #expect(received == 0 || (received < 0 && failure != EAGAIN && failure != EWOULDBLOCK),
                "expected the server to close the idle connection; recv returned \(received), errno \(failure)")
        await server.stop()
    }
}

func openTCPSocket() -> Int32 {
    socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
}
