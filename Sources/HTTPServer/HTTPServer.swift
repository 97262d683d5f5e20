import Synchronization
import RelayBasics

/// An HTTP/1.1 server on libmicrohttpd with async handlers.
///
/// libmicrohttpd owns the sockets and its own threads. A request is read
/// there; the connection is then suspended and the handler runs on Swift's
/// concurrency pool; when it returns, the connection resumes and the
/// response is queued. No libmicrohttpd thread ever waits on async work, and
/// no Swift task ever blocks on a socket.
public final class HTTPServer: Sendable {
    /// Limits and addresses.
    public struct Configuration: Sendable {
        /// IPv4 address to listen on; `127.0.0.1` keeps it on loopback.
        public var host: String = "127.0.0.1"
        /// 0 picks a free port (see ``HTTPServer/port``).
        public var port: UInt16 = 0
        /// Largest request body accepted; larger bodies get 413 unread.
        public var maximumBodyBytes: Int = 1 << 20
        /// Seconds a connection may sit idle (between requests, or a client
        /// that stops reading an answer) before it is closed.
        public var connectionTimeoutSeconds: Int = 30
        /// Seconds a client has to send one whole request, request line,
        /// headers and body, however it trickles them; past it the
        /// connection is cut. Counted from accept, or on a kept-alive
        /// connection from the request line (see ``RequestDeadlines``).
        public var requestTimeoutSeconds: Int = 15
        /// Most connections kept open at once. One more sheds one: first a
        /// connection that has not completed a request yet (from the address
        /// holding most of those, the oldest), else the longest-idle kept-alive
        /// one, else the newcomer; a connection whose request is being handled
        /// is never shed. libmicrohttpd itself accepts up to
        /// ``HTTPServer/acceptLimit(_:)`` so that shedding, not a full
        /// listener, decides who stays.
        public var connectionLimit: Int = 1024
        /// Most connections open at once from one client address, so one
        /// client cannot hold every slot; 0 for no cap.
        public var connectionsPerClientLimit: Int = 256
        /// libmicrohttpd polling threads.
        public var threads: Int = 2
        /// Bodies at least this long are gzipped for clients that accept gzip.
        public var gzipMinimumBytes: Int = 1024
        /// How the server words the errors it answers itself (malformed
        /// framing 400, unsupported transfer coding 501, body over the limit
        /// 413, drain 503), so they match the application's error envelope.
        public var errorRenderer: ErrorRenderer = HTTPServer.jsonErrorEnvelope
        /// Sees every response just before it is sent: the handlers', the
        /// router's 404 and 405, and the server's own errors; e.g. to stamp
        /// a trace header on all of them in one place.
        public var responseFinisher: ResponseFinisher?

        public init() {}
    }

    /// Renders an error the server answers itself: status, a stable `type`
    /// (`InvalidRequest`, `PayloadTooLarge`, `NotImplemented`, `Draining`), a message,
    /// and the header at fault when one is (a control character in its value).
    public typealias ErrorRenderer = @Sendable (_ status: Int, _ type: HTTPRefusalType, _ message: String, _ field: String?) -> HTTPResponse

    /// Adjusts a response before it is sent; `request` has no body.
    public typealias ResponseFinisher = @Sendable (_ request: HTTPRequest, _ response: inout HTTPResponse) -> Void

    /// `{"error":{"type":…,"message":…}}`, the envelope the ingress answers with.
    public static let jsonErrorEnvelope: ErrorRenderer = { status, type, message, field in
        let fieldMember = field.map { #","field":\#(jsonString($0))"# } ?? ""
        return .json(status, Array(#"{"error":{"type":\#(jsonString(type.rawValue)),"message":\#(jsonString(message))\#(fieldMember)}}"#.utf8))
    }

    /// `text` as a JSON string literal, quotes included.
    static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// libmicrohttpd's own connection limit for a configured `connectionLimit`:
    /// an eighth more (at least 16) for connections shed and not yet closed.
    public static func acceptLimit(_ connectionLimit: Int) -> Int {
        connectionLimit + max(16, connectionLimit / 8)
    }

    let daemon: MHDDaemon
    /// The port the server listens on.
    public let port: UInt16

    /// Starts listening at once.
    public init(configuration: Configuration = Configuration(), router: Router) throws(HTTPServerError) {
        daemon = try MHDDaemon(configuration: configuration, router: router)
        port = daemon.port
    }

    /// Connections cut because their request did not arrive whole within
    /// ``Configuration/requestTimeoutSeconds``, since start.
    public var requestsTimedOut: Int { daemon.core.deadlines.cut }

    /// Connections closed to keep the count under
    /// ``Configuration/connectionLimit``, since start.
    public var connectionsShed: Int { daemon.core.deadlines.shed }

    /// Requests whose handlers are running.
    public var inFlight: Int { daemon.core.inFlight.load(ordering: .relaxed) }

    /// Stops accepting connections at once: a new connection is refused
    /// (the client can go to another instance), while connections already
    /// open keep being served. ``stop(drainTimeout:)`` begins with it.
    public func stopAccepting() {
        daemon.quiesce()
    }

    /// Stops accepting connections, waits up to `drainTimeout` seconds for
    /// running handlers to answer, then stops.
    public func stop(drainTimeout: Double = 5) async {
        stopAccepting()
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(Int(drainTimeout * 1000))
        while inFlight > 0, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        // Keep-alive connections may still bring requests after the wait:
        // from here they are answered at once, never suspended.
        daemon.core.closeIntake()
        if inFlight > 0 {
            // Past the drain timeout, or a request that came in just before the
            // intake closed: answer what is left (libmicrohttpd cannot stop with
            // suspended connections) and give it a moment to go out.
            var draining = daemon.core.configuration.errorRenderer(503, .draining, "the relay stopped before this request finished", nil)
            draining.headers.append(HTTPHeader("retry-after", "1"))
            daemon.resumeSuspended(with: draining)
            let flushed = clock.now + .seconds(2)
            while inFlight > 0, clock.now < flushed {
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        daemon.stop()
    }
}

/// The server could not start.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public var description: String
}
