import Foundation
import HTTP2
import Testing
import RelayBasics
import TestSupport

/// Our client against nghttpd, an HTTP/2 server nobody here wrote.
@Suite("HTTP/2 client against nghttpd")
struct NGHTTPDInteropTests {
    struct Server: Sendable {
        let process: ChildProcess
        let port: Int
        let certificate: TestCertificate
        let documentRoot: String

        init(extra: [String] = []) throws {
            certificate = try TestCertificate()
            documentRoot = certificate.directory + "/www"
            try FileManager.default.createDirectory(atPath: documentRoot, withIntermediateDirectories: true)
            try "hello from nghttpd\n".write(toFile: documentRoot + "/hello.txt", atomically: true, encoding: .utf8)
            port = Command.freePort()
            process = try Command.start(["nghttpd", "--echo-upload", "-d", documentRoot] + extra + [String(port), certificate.key, certificate.certificate])
            try Command.waitUntilListening(port: port)
        }

        func stop() {
            // nghttpd ignores SIGTERM.
            process.kill()
            _ = process.waitUntilExit()
            certificate.remove()
        }

        func connection(_ configure: (inout HTTP2Connection.Configuration) -> Void = { _ in }) -> HTTP2Connection {
            var configuration = HTTP2Connection.Configuration(host: "127.0.0.1", port: port)
            configuration.tls = TLSClientConfiguration(caFile: certificate.certificate)
            configure(&configuration)
            return HTTP2Connection(configuration: configuration)
        }
    }

    @Test("GET and POST over TLS with ALPN h2, certificate verified against the test CA")
    func getAndPost() async throws {
        let server = try Server()
        defer { server.stop() }
        let connection = server.connection()
        let get = try await connection.send(HTTP2Request(method: "GET", path: "/hello.txt"))
        #expect(get.status == 200)
        #expect(String(decoding: get.body, as: UTF8.self) == "hello from nghttpd\n")
        let payload = Array(String(repeating: "{\"aps\":{}}", count: 3000).utf8)  // 30 KB: several DATA frames
        let post = try await connection.send(HTTP2Request(method: "POST", path: "/echo", headers: [HTTPHeader("content-type", "application/json")], body: payload))
        #expect(post.status == 200)
        #expect(post.body == payload)
        #expect(try await connection.send(HTTP2Request(method: "GET", path: "/missing")).status == 404)
        await connection.close()
        #expect(connection.state == .closed)
    }

    @Test("500 concurrent requests on one connection all complete")
    func concurrency() async throws {
        let server = try Server(extra: ["--max-concurrent-streams=50"])
        defer { server.stop() }
        let connection = server.connection()
        // Most of them wait in line for one of the 50 streams, which counts
        // against their deadline: a generous one, so only a failure fails them.
        let statuses = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<500 {
                group.addTask { (try? await connection.send(HTTP2Request(method: "GET", path: "/hello.txt", timeout: guardTimeout)).status) ?? -1 }
            }
            var collected: [Int] = []
            for await status in group { collected.append(status) }
            return collected
        }
        #expect(statuses.count == 500)
        #expect(statuses.allSatisfy { $0 == 200 })
        await connection.close()
    }

    @Test("TLS failures are clear: unknown CA, wrong host name")
    func tlsFailures() async throws {
        let server = try Server()
        defer { server.stop() }
        let other = try TestCertificate()
        defer { other.remove() }
        let unknownCA = server.connection { $0.tls = TLSClientConfiguration(caFile: other.certificate) }
        await #expect {
            try await unknownCA.send(HTTP2Request(method: "GET", path: "/hello.txt"))
        } throws: { error in
            let error = error as! HTTP2Error
            return error.code == .tls && error.message.contains("certificate verification failed")
        }
        let wrongName = server.connection { $0.tls = TLSClientConfiguration(caFile: server.certificate.certificate, serverName: "api.push.apple.com") }
        await #expect {
            try await wrongName.send(HTTP2Request(method: "GET", path: "/hello.txt"))
        } throws: { error in
            let error = error as! HTTP2Error
            return error.code == .tls && error.message.contains("hostname mismatch")
        }
    }
}
