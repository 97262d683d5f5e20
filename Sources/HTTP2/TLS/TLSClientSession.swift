/// A TLS client session over a connected non-blocking socket, for a caller
/// that drives it with its own waits (the OTLP exporter's HTTP/1.1 client):
/// each call does what it can without blocking and says what it waits for.
/// The socket stays the caller's.
public final class TLSClientSession {
    public enum Step: Sendable {
        /// Done: bytes read or written (0 for a finished handshake).
        case done(Int)
        /// Call again once the socket is readable / writable.
        case wantRead, wantWrite
        /// The peer closed the session.
        case closed
        case failed(String)
    }

    /// An SSL context made once (it loads the trust store) and shared by sessions.
    public final class Context: Sendable {
        let context: TLSContext

        public init(_ configuration: TLSClientConfiguration) throws(HTTP2Error) {
            context = try TLSContext(client: configuration)
        }
    }

    private let stream: TLSStream

    /// - Parameter serverName: the host name or IP address the certificate must match.
    public init(context: Context, socket: Int32, serverName: String) throws(HTTP2Error) {
        stream = try TLSStream(context: context.context, socket: socket, client: true, serverName: serverName)
    }

    public func handshake() -> Step {
        do {
            switch try stream.handshake() {
            case .done: return .done(0)
            case .wantRead: return .wantRead
            case .wantWrite: return .wantWrite
            }
        } catch {
            return .failed(error.description)
        }
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer) -> Step {
        Self.step(stream.read(into: buffer))
    }

    public func write(_ bytes: UnsafeRawBufferPointer) -> Step {
        Self.step(stream.write(bytes))
    }

    /// Sends close_notify, best effort.
    public func shutdown() { stream.shutdown() }

    private static func step(_ result: TLSStream.IOResult) -> Step {
        switch result {
        case .bytes(let count): .done(count)
        case .wouldBlock(let wantsWrite): wantsWrite ? .wantWrite : .wantRead
        case .closed: .closed
        case .failed(let reason): .failed(reason)
        }
    }
}
