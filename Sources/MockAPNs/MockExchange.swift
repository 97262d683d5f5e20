public import HTTP2
public import RelayBasics
import RelayJSON

/// A request as the mock's transport received it.
public struct MockRequest: Sendable, Hashable {
    public var method: String
    public var path: String
    /// Headers in arrival order, names lowercase; repeats are kept so the
    /// mock can answer DuplicateHeaders like APNs.
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// Which connection and stream carried it (0 when the transport has none).
    public var connectionID: Int
    public var streamID: Int32

    public init(method: String, path: String, headers: [HTTPHeader], body: [UInt8] = [], connectionID: Int = 0, streamID: Int32 = 0) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.connectionID = connectionID
        self.streamID = streamID
    }

    /// The first value of header `name`.
    public func header(_ name: String) -> String? { headers.value(of: name) }
}

/// An HTTP response the mock sends: the HTTP/2 server's own response type,
/// so the server hands it to nghttp2 and the in-memory transport to the
/// relay without copying it.
public typealias MockResponse = HTTP2Response

extension HTTP2Response {
    /// The `reason` in an APNs error body, if any.
    public var reason: String? {
        // The mock logs every answer's reason: a 200's empty body is no JSON, so no parse.
        body.isEmpty ? nil : (try? JSONParser.parse(body))?["reason"]?.stringValue
    }
}

/// What the transport should do with a request.
public enum MockAction: Sendable, Hashable {
    /// Answer, after waiting `delayMilliseconds`.
    case respond(MockResponse, delayMilliseconds: Int)
    /// Never answer this stream (the client's timeout must fire).
    case noAnswer
    /// Answer with `response` once the engine's held answers are released (``MockAPNsEngine/releaseHeld()``).
    case hold(MockResponse)
    /// Reset the TCP connection mid-stream, without HTTP/2 goodbyes.
    case resetConnection
    /// Send GOAWAY. Graceful: last-stream-id is this stream, which is then
    /// answered with `response`. Abrupt: last-stream-id is 0, the stream is
    /// refused, and the connection closes.
    case goAway(graceful: Bool, response: MockResponse?)
}
