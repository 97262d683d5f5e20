import Foundation
import HTTP2
import Testing
import TestSupport

/// `openssl s_server`: a TLS server nobody here wrote, that speaks no HTTP/2.
struct OpenSSLServer: Sendable {
    /// Its standard input is a pipe kept open: s_server drops its client when stdin reaches EOF.
    let process: ChildProcess
    let port: Int
    let certificate: TestCertificate

    /// - Parameter alpn: the protocols s_server accepts; none means it
    ///   ignores the client's ALPN offer entirely.
    init(alpn: String?) throws {
        certificate = try TestCertificate()
        port = Command.freePort()
        process = try ChildProcess(
            ["openssl", "s_server", "-quiet", "-accept", String(port), "-cert", certificate.certificate, "-key", certificate.key]
                + (alpn.map { ["-alpn", $0] } ?? []),
            input: true)
        do {
            try Command.waitUntilListening(port: port)
        } catch {
            stop()
            throw error
        }
    }

    func connection(_ configure: (inout HTTP2Connection.Configuration) -> Void = { _ in }) -> HTTP2Connection {
        var configuration = HTTP2Connection.Configuration(host: "127.0.0.1", port: port)
        configuration.tls = TLSClientConfiguration(caFile: certificate.certificate)
        configure(&configuration)
        return HTTP2Connection(configuration: configuration)
    }

    func stop() {
        process.kill()  // s_server may sit out SIGTERM
        _ = process.waitUntilExit()
        certificate.remove()
    }
}

@Suite("TLS set-up failures are clear")
struct TLSTests {
    @Test("a server that ignores ALPN (openssl s_server without -alpn) is a no_h2 error")
    func serverIgnoringALPN() async throws {
        try await Self.expectNoHTTP2(alpn: nil, saying: "did not agree to HTTP/2 in ALPN (got nothing)")
    }

    @Test("a server whose ALPN offers only http/1.1 is a no_h2 error, not a generic TLS failure")
    func serverWithOtherALPN() async throws {
        try await Self.expectNoHTTP2(alpn: "http/1.1", saying: "no application protocol")
    }

    /// A request to `openssl s_server` offering `alpn` fails as no_h2 with a
    /// message containing `message`, and the connection ends closed.
    static func expectNoHTTP2(alpn: String?, saying message: String) async throws {
        let server = try OpenSSLServer(alpn: alpn)
        defer { server.stop() }
        let connection = server.connection()
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/"))
        } throws: { error in
            let error = error as! HTTP2Error
            return error.code == .noHTTP2 && error.message.contains(message)
        }
        #expect(connection.state == .closed)
    }

    @Test("without a CA override the system trust store decides: a self-signed server is refused")
    func systemTrustStoreByDefault() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        let connection = local.connection { $0.tls = TLSClientConfiguration() }
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/"))
        } throws: { error in
            let error = error as! HTTP2Error
            return error.code == .tls && error.message.contains("certificate verification failed: self-signed certificate")
        }
        #expect(local.server.acceptedConnections == 1)
    }

    @Test("a certificate for another name is refused, and so is one for another IP address")
    func wrongNames() async throws {
        let local = try LocalServer(handler: echoHandler)
        defer { local.stop() }
        for name in ["api.push.apple.com", "127.0.0.2"] {
            let connection = local.connection { $0.tls.serverName = name }
            await #expect {
                try await connection.send(HTTP2Request(method: "GET", path: "/"))
            } throws: { error in
                let error = error as! HTTP2Error
                return error.code == .tls && error.message.contains("certificate verification failed")
            }
        }
        // The right names pass: the failures above are the names, not the set-up.
        for name in ["localhost", "127.0.0.1"] {
            let connection = local.connection { $0.tls.serverName = name }
            #expect(try await connection.send(HTTP2Request(method: "GET", path: "/ok")).status == 200)
            await connection.close()
        }
    }
}
