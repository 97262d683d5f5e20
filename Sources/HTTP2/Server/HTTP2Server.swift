import Foundation
public import RelayBasics
import Synchronization

/// A request as the server received it.
public struct HTTP2ServerRequest: Sendable {
    public var method: String
    public var path: String
    public var authority: String?
    /// Regular headers in arrival order (pseudo-headers excluded), repeats kept.
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// Which accepted connection carried it (1, 2, … in accept order).
    public var connectionID: Int
    public var streamID: Int32
    /// The connection's client certificate, verified against the server's
    /// client CA; nil without TLS, without a client CA, or when the client sent none.
    public var clientCertificate: ClientCertificate? = nil
}

/// How the server answers one request. Exactly one call per request; the
/// handler may call it at once or later from any thread.
public final class HTTP2Responder: Sendable {
    let connection: ServerConnection
    let stream: Int32

    init(connection: ServerConnection, stream: Int32) {
        self.connection = connection
        self.stream = stream
    }

    /// Sends `response`, after `delayMilliseconds` if given.
    public func respond(_ response: HTTP2Response, delayMilliseconds: Int = 0) {
        connection.command(.respond(stream: stream, response: response, due: MonotonicClock.now() + UInt64(max(0, delayMilliseconds)) * 1_000_000))
    }

    /// Drops the TCP connection with a reset, no HTTP/2 goodbye.
    public func resetConnection() { connection.command(.reset) }

    /// Sends GOAWAY. Graceful: last-stream-id is this stream, which is then
    /// answered with `response`; later streams are refused. Abrupt:
    /// last-stream-id 0 and the connection closes at once.
    public func goAway(graceful: Bool, response: HTTP2Response?) {
        connection.command(.goAway(stream: stream, graceful: graceful, response: response))
    }

    /// Sends this connection's client a new SETTINGS_MAX_CONCURRENT_STREAMS,
    /// before anything answered later (APNs lowers its limit mid-connection).
    public func changeMaxConcurrentStreams(to value: UInt32) {
        connection.command(.maxConcurrentStreams(value))
    }

    /// Leaves the stream unanswered (the client's timeout must fire).
    public func ignore() {}
}

/// Handles requests on the server's connection thread (one serves every
/// established connection, ``ServerLoop``): it must not block. Answer
/// through the responder (now, or later from anywhere).
public typealias HTTP2ServerHandler = @Sendable (HTTP2ServerRequest, HTTP2Responder) -> Void

/// An HTTP/2 server, over TLS or cleartext with prior knowledge: the mock
/// APNs, tests, and the relay's APNs-compatible ingress, with the fault hooks
/// a mock needs and the limits a public listener needs. One thread accepts;
/// each connection sets up (the TLS handshake) on a thread of its own, then
/// one thread serves every established connection (``ServerLoop``); none
/// runs on Swift's cooperative pool.
public final class HTTP2Server: Sendable {
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        /// 0 picks a free port (see ``HTTP2Server/port``).
        public var port = 0
        /// Certificate and key for TLS with ALPN `h2`; nil serves cleartext
        /// HTTP/2 with prior knowledge (loopback, a service mesh's sidecar).
        public var tls: TLSServerConfiguration?
        /// SETTINGS_MAX_CONCURRENT_STREAMS advertised to clients (nghttp2
        /// refuses streams beyond it with RST_STREAM REFUSED_STREAM).
        public var maxConcurrentStreams: UInt32 = 1000
        /// Bytes of one request's header block (names and values, 32 more per
        /// field as RFC 9113 counts): advertised as SETTINGS_MAX_HEADER_LIST_SIZE
        /// and enforced, answered ``limitResponse`` with 431. nil: nghttp2's own limits only.
        public var maxHeaderListBytes: Int?
        /// Bytes of one request's body: beyond it the rest is dropped and the
        /// request answered ``limitResponse`` with 413, never handed to the handler.
        public var maxRequestBodyBytes: Int?
        /// Connections open at once from one client address; beyond it new
        /// ones are closed at accept. nil: no cap.
        public var maxConnectionsPerAddress: Int?
        /// Connections open at once in all; beyond it new ones are closed at accept.
        public var maxConnections: Int?
        /// Connections setting up (the TLS handshake, up to 10 s each) at
        /// once: each holds a thread. At the bound the listener stops
        /// accepting (the next connections wait in the kernel's backlog)
        /// until one is done, so a flood of clients that never finish their
        /// handshake holds this many threads, not one per connection
        /// `maxConnections` allows, and cannot take the threads the rest
        /// of the process needs (a container's pids limit). nil: no bound.
        public var maxConnectionsSettingUp: Int? = 64
        /// Seconds from a request's first header to its last byte; a stream
        /// still incomplete then is reset (a slow client holds nothing longer). nil: no limit.
        public var requestTimeLimitSeconds: Double?
        /// The answer to a request refused by a limit above (413, 431), built by the server's user.
        public var limitResponse: @Sendable (_ status: Int) -> HTTP2Response = { HTTP2Response(status: $0) }
        /// Called on the connections' thread when a client resets a stream
        /// (RST_STREAM): connection id, stream id, HTTP/2 error code (8 is
        /// CANCEL). Lets a mock or a test see what a client gave up on.
        public var onStreamReset: (@Sendable (_ connectionID: Int, _ streamID: Int32, _ errorCode: UInt32) -> Void)?

        public init(tls: TLSServerConfiguration?) { self.tls = tls }
    }

    let listener: Listener
    /// The port the server listens on.
    public var port: Int { listener.port }

    public init(configuration: Configuration, handler: @escaping HTTP2ServerHandler) throws(HTTP2Error) {
        listener = try Listener(configuration: configuration, handler: handler)
    }

    /// Connections accepted so far.
    public var acceptedConnections: Int { listener.accepted.load(ordering: .relaxed) }

    /// Connections closed at accept because a connection cap was reached, or
    /// for want of a descriptor or a thread to serve them with.
    public var refusedConnections: Int { listener.refusedByReason.values.reduce(0, +) }

    /// Why a connection was closed at accept.
    public enum Refusal: String, Sendable, CaseIterable {
        /// ``Configuration/maxConnections`` were open.
        case maxConnections = "max_connections"
        /// ``Configuration/maxConnectionsPerAddress`` were open from its address.
        case maxConnectionsPerAddress = "max_connections_per_client"
        /// No descriptor was left to serve it with (the open-file limit).
        case noDescriptor = "descriptors"
        /// No thread could be started to set it up (a pids limit, RLIMIT_NPROC).
        case noThread = "threads"
        /// The server was stopping.
        case stopping = "stopping"
    }

    /// ``refusedConnections`` by why, every reason present (0 when none).
    public var refusedConnectionsByReason: [Refusal: Int] {
        let counted = listener.refusedByReason
        return Dictionary(uniqueKeysWithValues: Refusal.allCases.map { ($0, counted[$0] ?? 0) })
    }

    /// Stops accepting and closes every connection.
    ///
    /// - Parameter grace: how long a connection may go on answering the
    ///   streams it already took before it closes. 0: it writes its GOAWAY
    ///   (naming the last of them) at once and closes as soon as that is
    ///   written; answers still coming are dropped (a mock APNs going away).
    ///   Over 0: a stream opened from now on is refused (REFUSED_STREAM),
    ///   and the GOAWAY goes out after the last answer, or when `grace`
    ///   runs out. That order matters: nghttp2 writes a GOAWAY ahead of
    ///   answers queued with it, and clients built on python-hyper's h2
    ///   (httpx) fail every open stream once they read one.
    public func stop(grace: Double = 0) { listener.stop(grace: grace) }

    /// Connections setting up now (their TLS handshake), each on a thread of its own.
    public var connectionsSettingUp: Int { listener.settingUp.value.load(ordering: .relaxed) }

    /// Connections still answering streams they took: neither closed nor
    /// in their final lingering close. After ``stop()``, 0 once every
    /// answer handed to a responder has been written.
    public var connectionsAnswering: Int { listener.connectionsAnswering }

    deinit { listener.stop() }
}
