import HTTPServer
import Logging
import Synchronization

/// `/metrics`, `/healthz` and `/readyz` on libmicrohttpd
/// (`metrics.listen`): bound when the relay starts, stopped late in the
/// drain so the drain itself can be watched.
final class MetricsListener: RelayPart, Sendable {
    let name = "metrics listener"
    let listen: ServerConfiguration.Address
    let router: Router
    let logger: Logger
    private let server = Mutex<HTTPServer?>(nil)

    init(listen: ServerConfiguration.Address, router: Router, logger: Logger) {
        self.listen = listen
        self.router = router
        self.logger = logger
    }

    /// The bound port (the real one when the configuration said 0); 0 before the start.
    var port: UInt16 { server.withLock { $0?.port } ?? 0 }

    /// Binds the port and starts libmicrohttpd's thread.
    func start() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.host = listen.host
        configuration.port = listen.port
        configuration.threads = 1
        do {
            let started = try HTTPServer(configuration: configuration, router: router)
            server.withLock { $0 = started }
        } catch {
            throw ConfigurationError(field: "metrics.listen", "cannot listen on \(listen): \(error)")
        }
    }

    func undoStart() async {
        await server.withLock { $0 }?.stop(drainTimeout: 0)
    }

    func stop() async {
        await server.withLock { $0 }?.stop(drainTimeout: 1)
    }
}
