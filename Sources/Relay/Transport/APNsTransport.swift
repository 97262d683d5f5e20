public import APNs

/// Carries one HTTP/2 request to an origin and brings back the answer.
///
/// The relay's send pipeline talks to this protocol, not to a socket: in
/// production it is the nghttp2 connection pool, in unit tests an in-memory
/// mock APNs. Retries, JWTs and events stay in the pipeline either way.
public protocol APNsTransport: Sendable {
    func send(_ request: TransportRequest) async throws(TransportError) -> TransportResponse
}

/// A request as the transport sends it, `authorization` included.
public struct TransportRequest: Sendable {
    public var origin: Origin
    public var method: String
    public var path: String
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// How long to wait for the answer, in seconds.
    public var timeout: Double

    public init(origin: Origin, method: String, path: String, headers: [HTTPHeader], body: [UInt8], timeout: Double) {
        self.origin = origin
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// What came back.
public struct TransportResponse: Sendable {
    public var status: Int
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    public init(status: Int, headers: [HTTPHeader], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first(where: { $0.name == lowered })?.value
    }
}

/// Why a request got no HTTP answer.
public struct TransportError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Kind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// No answer within the request timeout (the stream was reset).
        public static let timeout = Kind(rawValue: "timeout")
        /// The connection failed or closed under the request.
        public static let connection = Kind(rawValue: "connection")
        /// The server never processed the request (GOAWAY above last-stream-id,
        /// REFUSED_STREAM), and the pool's own resends are spent: final.
        public static let unprocessed = Kind(rawValue: "unprocessed")
        /// The pending-request queue is full: back-pressure, not a fault.
        public static let queueFull = Kind(rawValue: "queue_full")
        /// TLS or ALPN failed: configuration, not worth retrying quickly.
        public static let tls = Kind(rawValue: "tls")
        /// The transport is closed.
        public static let closed = Kind(rawValue: "closed")
        /// The caller cancelled.
        public static let cancelled = Kind(rawValue: "cancelled")
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(kind): \(message)" }
}
