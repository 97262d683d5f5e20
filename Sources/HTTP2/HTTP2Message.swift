public import RelayBasics

/// One HTTP/2 request: pseudo-headers come from the fields, headers are sent
/// in order.
///
/// The message types know nothing about APNs: the relay builds this request
/// from an `APNsRequest` once per attempt (adding `authorization`) and hands
/// it through its transport protocol unchanged.
public struct HTTP2Request: Sendable {
    public var method: String
    public var path: String
    /// `host` or `host:port`; defaults to the connection's origin.
    public var authority: String?
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// Seconds to wait for the complete answer before the stream is reset.
    public var timeout: Double

    public init(method: String, path: String, authority: String? = nil, headers: [HTTPHeader] = [], body: [UInt8] = [], timeout: Double = 10) {
        self.method = method
        self.path = path
        self.authority = authority
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// A complete HTTP/2 response.
public struct HTTP2Response: Sendable, Hashable {
    public var status: Int
    /// Response headers (pseudo-headers excluded), lowercase names.
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of the first header called `name` (any case).
    public func header(_ name: String) -> String? { headers.value(of: name) }
}

/// Why a request got no complete HTTP answer.
public struct HTTP2Error: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// No answer within the request's timeout; the stream was reset.
        public static let timeout = Code(rawValue: "timeout")
        /// The server never processed the request it was sent (above
        /// GOAWAY's last-stream-id, REFUSED_STREAM): safe to resend.
        public static let unprocessed = Code(rawValue: "unprocessed")
        /// The request never left this client: its connection began closing
        /// or going away first. Safe to send again, and no transmission: the
        /// pool re-picks a connection without counting it as a resend.
        public static let notSent = Code(rawValue: "not_sent")
        /// The connection failed or closed while the request was in flight.
        public static let connection = Code(rawValue: "connection")
        /// The peer did not acknowledge a keep-alive PING in time; the
        /// connection was closed. The request may or may not have been processed.
        public static let pingTimeout = Code(rawValue: "ping_timeout")
        /// TCP connect failed or was refused.
        public static let connectFailed = Code(rawValue: "connect_failed")
        /// TLS handshake or certificate verification failed.
        public static let tls = Code(rawValue: "tls")
        /// The server did not agree to HTTP/2 in ALPN.
        public static let noHTTP2 = Code(rawValue: "no_h2")
        /// The waiting queue is full.
        public static let queueFull = Code(rawValue: "queue_full")
        /// The stream was reset by the peer with an error.
        public static let streamReset = Code(rawValue: "stream_reset")
        /// The caller cancelled.
        public static let cancelled = Code(rawValue: "cancelled")
        /// The connection or pool is closed.
        public static let closed = Code(rawValue: "closed")
        /// The protocol went wrong (nghttp2 reported an error).
        public static let proto = Code(rawValue: "protocol")
    }

    public var code: Code
    public var message: String
    /// For `.unprocessed`: the server processed other streams on the same
    /// connection (it answered one, or its GOAWAY's last-stream-id is above
    /// 0), so this refusal came from load or a connection rotation, not from
    /// a server that processes nothing. ``HTTP2Pool`` does not count such a
    /// resend against its bound.
    public var serverMadeProgress = false
    /// The whole request (its END_STREAM frame) was handed to the connection
    /// before it failed: the server may have acted on it though it never
    /// answered (a timeout, a reset, a connection lost mid-answer). False
    /// when it provably never left whole (still waiting for a stream, the
    /// connect or handshake failed, the body held back by flow control), so
    /// resending it cannot make the server see it twice.
    public var requestWritten = false

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A failure of a request that was on a stream, saying whether it went
    /// out whole (``requestWritten``).
    init(_ code: Code, _ message: String, written: Bool) {
        self.init(code, message)
        requestWritten = written
    }

    public var description: String { "\(code): \(message)" }
}

/// Something that happened to a connection, for metrics.
public enum HTTP2ConnectionEvent: String, Sendable, Hashable {
    case opened, closed, goaway, pingTimeout = "ping_timeout", reconnect, refused
}

/// Receives connection events.
public typealias HTTP2EventObserver = @Sendable (_ origin: String, _ event: HTTP2ConnectionEvent) -> Void
