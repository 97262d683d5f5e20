import Synchronization

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
        /// Seconds a connection may sit idle or trickle bytes before it is closed.
        public var connectionTimeoutSeconds: Int = 30
        /// Most connections open at once; more are refused at accept.
        public var connectionLimit: Int = 1024
        /// libmicrohttpd polling threads.
        public var threads: Int = 2
        /// Bodies at least this long are gzipped for clients that accept gzip.
        public var gzipMinimumBytes: Int = 1024

        public init() {}
    }

    let daemon: MHDDaemon
    /// The port the server listens on.
    public let port: UInt16

    /// Starts listening at once.
    public init(configuration: Configuration = Configuration(), router: Router) throws(HTTPServerError) {
        daemon = try MHDDaemon(configuration: configuration, router: router)
        port = daemon.port
    }

    /// Requests whose handlers are running.
    public var inFlight: Int { daemon.core.inFlight.load(ordering: .relaxed) }

    /// Stops accepting connections, waits up to `drainTimeout` seconds for
    /// running handlers to answer, then stops.
    public func stop(drainTimeout: Double = 5) async {
        daemon.quiesce()
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(Int(drainTimeout * 1000))
        while inFlight > 0, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        if inFlight > 0 {
            // Past the drain timeout: answer what is left (libmicrohttpd cannot
            // stop with suspended connections) and give it a moment to go out.
            daemon.resumeSuspended(with: .json(503, Array(#"{"error":{"type":"Draining","message":"the relay stopped before this request finished"}}"#.utf8), headers: [("retry-after", "1")]))
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
