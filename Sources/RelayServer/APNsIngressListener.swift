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

    /// Stops accepting, ends the waiting workers, and closes every
    /// connection once the answers to the streams it took are written,
    /// within `grace` seconds (the drain's time left); returns then. The
    /// drain calls it once no request is in flight, and the last answers
    /// may still be on their way to their connection.
    func stop(grace: Double) async {
        server.stop(grace: grace)
        workers.close()
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(grace + 0.5)
        while server.connectionsAnswering > 0, clock.now < deadline { try? await Task.sleep(for: .milliseconds(5)) }
    }
}
