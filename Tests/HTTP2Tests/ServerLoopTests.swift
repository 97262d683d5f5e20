import Foundation
import HTTP2
import Synchronization
import Testing
import TestSupport
import RelayBasics

#if canImport(Glibc)
    import Glibc
#endif

/// The server's established connections share one thread (`ServerLoop`):
/// an answer given from another thread wakes one thread for every
/// connection, not one per connection (issue 30, step 5).
@Suite("HTTP/2 server: one loop thread for every connection")
struct ServerLoopTests {
    /// The threads the handler ran on, by connection id.
    final class HandlerThreads: Sendable {
        private let seen = Mutex<[Int: Set<UInt>]>([:])

        var handler: HTTP2ServerHandler {
            { request, responder in
                let thread = UInt(bitPattern: Int(bitPattern: pthread_self()))
                self.seen.withLock { $0[request.connectionID, default: []].insert(thread) }
                responder.respond(HTTP2Response(status: 200, body: Array(request.path.utf8)))
            }
        }

        var byConnection: [Int: Set<UInt>] { seen.withLock { $0 } }
    }

    @Test("two clients' connections are served on one thread, every request answered", .timeLimit(.minutes(2)))
    func oneThreadForAll() async throws {
        let threads = HandlerThreads()
        let local = try LocalServer(handler: threads.handler)
        defer { local.stop() }
        // Each client connection on a loop of its own: nothing on the
        // client side ties the two together.
        let first = local.connection()
        let second = local.connection()
        for index in 0..<3 {
            let a = try await first.send(HTTP2Request(method: "POST", path: "/a/\(index)", body: [1]))
            let b = try await second.send(HTTP2Request(method: "POST", path: "/b/\(index)", body: [2]))
            #expect(a.status == 200 && a.body == Array("/a/\(index)".utf8))
            #expect(b.status == 200 && b.body == Array("/b/\(index)".utf8))
        }
        let seen = threads.byConnection
        #expect(seen.count == 2, "two connections: \(seen)")
        let all = seen.values.reduce(into: Set<UInt>()) { $0.formUnion($1) }
        #expect(all.count == 1, "the handler ran on \(all.count) threads: \(seen)")
        await first.close()
        await second.close()
    }

    @Test("a client that connects and never finishes its TLS handshake holds up no other connection", .timeLimit(.minutes(2)))
    func stalledHandshakeHoldsNoOne() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        // A TCP connection that sends nothing: its handshake waits on a
        // thread of its own, not on the loop.
        let silent = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(silent >= 0)
        defer { close(silent) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(local.server.port).bigEndian
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(silent, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0)
        await waitUntil("the silent connection is accepted") { local.server.acceptedConnections == 1 }

        for name in ["one", "two"] {
            let connection = local.connection()
            let response = try await connection.send(HTTP2Request(method: "POST", path: "/\(name)", body: Array(name.utf8)))
            #expect(response.status == 200)
            #expect(response.body == Array(name.utf8))
            await connection.close()
        }
    }

    @Test("a request past the body limit is answered 413 without the handler, on a connection that then serves the next", .timeLimit(.minutes(2)))
    func limitAnsweredAtOnce() async throws {
        // The server's own refusals are answered on the loop's next turn,
        // with no command to wake it: the turn must see them as due.
        let certificate = try TestCertificate()
        defer { certificate.remove() }
        var configuration = HTTP2Server.Configuration(tls: TLSServerConfiguration(certificateChainFile: certificate.certificate, privateKeyFile: certificate.key))
        configuration.maxRequestBodyBytes = 1000
        configuration.limitResponse = { HTTP2Response(status: $0, body: Array("limit".utf8)) }
        let threads = HandlerThreads()
        let server = try HTTP2Server(configuration: configuration, handler: threads.handler)
        defer { server.stop() }
        var client = HTTP2Connection.Configuration(host: "127.0.0.1", port: server.port)
        client.tls = TLSClientConfiguration(caFile: certificate.certificate)
        let connection = HTTP2Connection(configuration: client)
        let refused = try await connection.send(HTTP2Request(method: "POST", path: "/large", body: [UInt8](repeating: 7, count: 20_000)))
        #expect(refused.status == 413 && refused.body == Array("limit".utf8))
        #expect(threads.byConnection.isEmpty, "the handler saw the refused request")
        let served = try await connection.send(HTTP2Request(method: "POST", path: "/small", body: [1]))
        #expect(served.status == 200 && served.body == Array("/small".utf8))
        await connection.close()
    }
}
