public import APNs
public import HTTP2

/// Carries one HTTP/2 request to an origin and brings back the answer.
///
/// The relay's send pipeline talks to this protocol, not to a socket: in
/// production it is the nghttp2 connection pool (``HTTP2Transport``), in unit
/// tests an in-memory mock APNs. Retries, JWTs and events stay in the
/// pipeline either way. The protocol speaks the HTTP/2 module's own message
/// types: the pipeline builds one `HTTP2Request` per attempt from the
/// `APNsRequest` (adding `authorization`) and gets the `HTTP2Response` back
/// as the pool delivered it, so no layer copies or converts headers. What it
/// adds is the `Origin` (which pool; HTTP2 knows nothing of APNs hosts) and
/// ``TransportError``, the failures as the retry engine classifies them.
public protocol APNsTransport: Sendable {
    /// Sends `request` to `origin`; `request.authority` is already set for it.
    func send(_ request: HTTP2Request, to origin: Origin) async throws(TransportError) -> HTTP2Response
}

/// Why a request got no HTTP answer, in the retry engine's terms: fewer
/// kinds than `HTTP2Error` has codes, each with one retry meaning, and the
/// vocabulary a fake transport throws in tests.
public struct TransportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `allCases` is what a `transport_<kind>` label may name: the metrics
    /// derive their label set from it.
    public enum Kind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// No answer within the request timeout (the stream was reset).
        case timeout
        /// The connection failed or closed under the request.
        case connection
        /// The server never processed the request (GOAWAY above last-stream-id,
        /// REFUSED_STREAM), and the pool's own resends are spent: final.
        case unprocessed
        /// The pending-request queue is full: back-pressure, not a fault.
        case queueFull = "queue_full"
        /// TLS or ALPN failed: configuration, not worth retrying quickly.
        case tls
        /// The transport is closed.
        case closed
        /// The caller cancelled.
        case cancelled

        public var description: String { rawValue }
    }

    public var kind: Kind
    public var message: String
    /// The whole request reached the connection before it failed, so APNs
    /// may have taken it though it never answered (see
    /// `HTTP2Error.requestWritten`). The retry rule resends such an attempt
    /// only for a send that did not ask to go out at most once.
    public var mayHaveReachedAPNs: Bool

    public init(_ kind: Kind, _ message: String, mayHaveReachedAPNs: Bool = false) {
        self.kind = kind
        self.message = message
        self.mayHaveReachedAPNs = mayHaveReachedAPNs
    }

    public var description: String { "\(kind): \(message)" }
}
