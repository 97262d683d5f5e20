import HTTP2
import HTTPServer

/// The HTTP/2 APNs ingress: its server, and the tasks that run its requests.
final class APNsIngressListener: Sendable {
    let server: HTTP2Server
    let workers: HandlerWorkers<Job>

    /// One request and where its answer goes.
    struct Job: Sendable {
        let request: HTTPRequest
        let responder: HTTP2Responder
    }

    init(server: HTTP2Server, workers: HandlerWorkers<Job>) {
        self.server = server
        self.workers = workers
    }

    /// The port the server listens on.
    var port: Int { server.port }

    /// Stops accepting, closes every connection, and ends the waiting workers.
    func stop() {
        server.stop()
        workers.close()
    }
}
