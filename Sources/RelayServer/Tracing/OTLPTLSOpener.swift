import HTTP2
import Telemetry

/// Opens TLS streams to an `https://` collector: a TCP connection
/// (``OTLPSocketStream``) with HTTP2's TLS over it, offering ALPN
/// `http/1.1`, the certificate verified against the endpoint's host (the
/// system trust store, or `OTEL_EXPORTER_OTLP_CERTIFICATE`).
struct OTLPTLSOpener: OTLPStreamOpener {
    let context: TLSClientSession.Context

    init(caFile: String?) throws(HTTP2Error) {
        var configuration = TLSClientConfiguration(caFile: caFile)
        configuration.alpnProtocols = ["http/1.1"]
        context = try TLSClientSession.Context(configuration)
    }

    func open(_ endpoint: OTLPEndpoint, deadline: OTLPDeadline) -> Result<any OTLPStream, OTLPExportFailure> {
        let socket: OTLPSocketStream
        switch OTLPSocketStream.connect(host: endpoint.host, port: endpoint.port, deadline: deadline) {
        case .success(let connected): socket = connected
        case .failure(let failure): return .failure(failure)
        }
        let session: TLSClientSession
        do {
            session = try TLSClientSession(context: context, socket: socket.fd, serverName: endpoint.host)
        } catch {
            return .failure(OTLPExportFailure("TLS to \(endpoint.host): \(error)", retryable: false))
        }
        let stream = OTLPTLSStream(socket: socket, session: session)
        while true {
            let events: Int16
            switch session.handshake() {
            case .done: return .success(stream)
            case .wantRead: events = OTLPTLSStream.pollIn
            case .wantWrite: events = OTLPTLSStream.pollOut
            case .closed, .failed:
                stream.close()
                return .failure(OTLPExportFailure("the TLS handshake with \(endpoint.host) failed", retryable: true))
            }
            guard OTLPSocketStream.wait(socket.fd, events: events, deadline: deadline) else {
                stream.close()
                return .failure(OTLPExportFailure("the TLS handshake with \(endpoint.host) did not finish in time", retryable: true))
            }
        }
    }
}

/// One TLS session over its socket, waited on with the export's deadline.
final class OTLPTLSStream: OTLPStream {
    static let pollIn: Int16 = 0x001
    static let pollOut: Int16 = 0x004
    let socket: OTLPSocketStream
    let session: TLSClientSession

    init(socket: OTLPSocketStream, session: TLSClientSession) {
        self.socket = socket
        self.session = session
    }

    func write(_ bytes: UnsafeRawBufferPointer, deadline: OTLPDeadline) -> Bool {
        var offset = 0
        while offset < bytes.count {
            switch session.write(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
            case .done(let count): offset += count
            case .wantRead: guard OTLPSocketStream.wait(socket.fd, events: Self.pollIn, deadline: deadline) else { return false }
            case .wantWrite: guard OTLPSocketStream.wait(socket.fd, events: Self.pollOut, deadline: deadline) else { return false }
            case .closed, .failed: return false
            }
        }
        return true
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, deadline: OTLPDeadline) -> Int? {
        while true {
            switch session.read(into: buffer) {
            case .done(let count): return count
            case .closed: return 0
            case .failed: return nil
            case .wantRead: guard OTLPSocketStream.wait(socket.fd, events: Self.pollIn, deadline: deadline) else { return nil }
            case .wantWrite: guard OTLPSocketStream.wait(socket.fd, events: Self.pollOut, deadline: deadline) else { return nil }
            }
        }
    }

    func close() {
        session.shutdown()
        socket.close()
    }
}
