public import HTTP2

/// The mock APNs on the wire: TLS HTTP/2 on loopback, answering through a
/// ``MockAPNsEngine`` and carrying out its faults (delays, no answer, TCP
/// resets, GOAWAY) on the real connection.
public final class MockAPNsServer: Sendable {
    public let engine: MockAPNsEngine
    let server: HTTP2Server
    /// The certificate clients must trust (its PEM file).
    public let certificateFile: String

    /// - Parameters:
    ///   - certificate: a certificate and key to serve; nil generates a
    ///     self-signed one for `localhost` and `127.0.0.1` in `directory`.
    public init(
        engine: MockAPNsEngine, port: Int = 0, host: String = "127.0.0.1", certificate: SelfSignedCertificate? = nil,
        directory: String
    ) throws {
        self.engine = engine
        let tlsFiles = try certificate ?? SelfSignedCertificate.generate(in: directory)
        certificateFile = tlsFiles.certificateFile
        var configuration = HTTP2Server.Configuration(
            tls: TLSServerConfiguration(certificateChainFile: tlsFiles.certificateFile, privateKeyFile: tlsFiles.privateKeyFile))
        configuration.host = host
        configuration.port = port
        configuration.maxConcurrentStreams = UInt32(engine.configuration.maxConcurrentStreams)
        server = try HTTP2Server(configuration: configuration) { request, responder in
            let mockRequest = MockRequest(
                method: request.method, path: request.path, headers: request.headers,
                body: request.body, connectionID: request.connectionID, streamID: request.streamID)
            switch engine.handle(mockRequest) {
            case .respond(let response, let delay):
                responder.respond(response, delayMilliseconds: delay)
            case .noAnswer:
                responder.ignore()
            case .hold(let response):
                engine.park { responder.respond(response) }
            case .resetConnection:
                responder.resetConnection()
            case .goAway(let graceful, let response):
                responder.goAway(graceful: graceful, response: response)
            }
        }
    }

    /// The port the mock listens on.
    public var port: Int { server.port }
    /// TCP connections accepted so far.
    public var acceptedConnections: Int { server.acceptedConnections }

    public func stop() { server.stop() }
}
