import Foundation
import HTTP2
import Testing
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Each accepted connection sets up (its TLS handshake, up to 10 s) on a
/// thread of its own. Unbounded, a flood of clients that connect and never
/// send a ClientHello held a thread each, up to `maxConnections` (1024 on
/// the relay's HTTP/2 ingress): under a container's pids limit, the threads
/// the rest of the relay needs (an APNs reconnect's) were gone.
@Suite("HTTP/2 server: connections setting up at once are bounded")
struct ServerSetUpBoundTests {
    /// A TCP connection to `port` on loopback that sends nothing.
    static func silentConnection(to port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HTTP2Error(.connectFailed, "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw HTTP2Error(.connectFailed, "connect: \(String(cString: strerror(errno)))")
        }
        return fd
    }

    @Test("two clients that never send a ClientHello hold a bound of 2 set-ups: a third client is not accepted meanwhile; once one of the two leaves, it is accepted, set up and answered")
    func setUpsBounded() async throws {
        let certificate = try TestCertificate()
        defer { certificate.remove() }
        var configuration = HTTP2Server.Configuration(
            tls: TLSServerConfiguration(certificateChainFile: certificate.certificate, privateKeyFile: certificate.key))
        configuration.maxConnectionsSettingUp = 2
        let server = try HTTP2Server(configuration: configuration, handler: echoHandler)
        defer { server.stop() }

        var silent = try (0..<2).map { _ in try Self.silentConnection(to: server.port) }
        defer { silent.forEach { close($0) } }
        #expect(await eventually(10) { server.connectionsSettingUp == 2 }, "setting up: \(server.connectionsSettingUp)")

        var clientConfiguration = HTTP2Connection.Configuration(host: "127.0.0.1", port: server.port)
        clientConfiguration.tls = TLSClientConfiguration(caFile: certificate.certificate)
        let client = HTTP2Connection(configuration: clientConfiguration)
        let answer = Task { try await client.send(HTTP2Request(method: "GET", path: "/")) }
        // Its connect completes in the kernel's backlog; the listener takes it not while both set-ups run.
        try await Task.sleep(for: .milliseconds(500))
        #expect(server.acceptedConnections == 2, "accepted \(server.acceptedConnections) with the bound reached")

        close(silent.removeFirst())
        let response = try await answer.value
        #expect(response.status == 200)
        #expect(server.acceptedConnections == 3)
        await client.close()
    }
}
