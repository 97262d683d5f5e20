import HTTPServer
import Ingress
import Logging
import Relay
import Synchronization

/// The ingress's listeners: the HTTP/1.1 API on libmicrohttpd
/// (`ingress.listen`) and, when `apns_ingress.listen` is set, the HTTP/2
/// APNs ingress. The last part to start (every part behind it runs before a
/// request is taken) and the first the drain stops: intake ends before
/// anything behind it.
final class IngressListener: RelayPart, Sendable {
    let name = "ingress listener"
    let settings: ServerConfiguration.IngressSettings
    let apnsIngress: ServerConfiguration.APNsIngressSettings
    let serverConfiguration: HTTPServer.Configuration
    let router: Router
    let ingress: Ingress
    let transport: HTTP2Transport
    let drain: DrainClock
    let drainTimeout: Double
    let logger: Logger
    private let servers = Mutex<(http: HTTPServer?, apns: APNsIngressListener?)>((nil, nil))

    init(configuration: ServerConfiguration, ingress: Ingress, transport: HTTP2Transport, drain: DrainClock, logger: Logger) {
        settings = configuration.ingress
        apnsIngress = configuration.apnsIngress
        var router = Router()
        ingress.install(on: &router)
        self.router = router
        serverConfiguration = Self.serverConfiguration(configuration.ingress, ingress: ingress)
        self.ingress = ingress
        self.transport = transport
        self.drain = drain
        drainTimeout = configuration.drainTimeoutSeconds
        self.logger = logger
    }

    static func serverConfiguration(_ settings: ServerConfiguration.IngressSettings, ingress: Ingress) -> HTTPServer.Configuration {
        var configuration = HTTPServer.Configuration()
        configuration.host = settings.listen.host
        configuration.port = settings.listen.port
        configuration.maximumBodyBytes = settings.maximumBodyBytes
        configuration.connectionTimeoutSeconds = settings.connectionTimeoutSeconds
        configuration.requestTimeoutSeconds = settings.requestTimeoutSeconds
        configuration.connectionsPerClientLimit = settings.maximumConnectionsPerClient
        configuration.connectionLimit = max(64, settings.maximumConcurrentRequests * 2)
        configuration.threads = settings.threads
        // The ingress words the server's own errors and stamps every answer's traceparent.
        ingress.prepare(&configuration)
        return configuration
    }

    /// The HTTP/1.1 port (the real one when the configuration said 0); 0 before the start.
    var port: UInt16 { servers.withLock { $0.http?.port } ?? 0 }
    /// The HTTP/2 APNs ingress, or nil when it is off or not started.
    var apnsIngressServer: APNsIngressListener? { servers.withLock { $0.apns } }
    /// Requests the HTTP/1.1 server cut at their deadline; 0 before the start.
    var requestsTimedOut: Int { servers.withLock { $0.http?.requestsTimedOut } ?? 0 }

    /// Raises the open-file limit for the connection limit, binds the
    /// HTTP/1.1 port, then the HTTP/2 APNs ingress's; when that one cannot
    /// start, the first is stopped before the error is thrown.
    func start() async throws {
        raiseOpenFileLimit()
        let http: HTTPServer
        do {
            http = try HTTPServer(configuration: serverConfiguration, router: router)
        } catch {
            throw ConfigurationError(field: "ingress.listen", "cannot listen on \(settings.listen): \(error)")
        }
        let apns: APNsIngressListener?
        do {
            apns = try RelayServer.startAPNsIngress(apnsIngress, ingress: ingress)
        } catch {
            await http.stop(drainTimeout: 0)
            throw ConfigurationError(field: "apns_ingress.listen", "cannot serve on \(apnsIngress.listen.map(\.description) ?? ""): \(error)")
        }
        servers.withLock { $0 = (http, apns) }
    }

    /// Every connection libmicrohttpd accepts is a descriptor, and so is
    /// every connection the HTTP/2 APNs ingress keeps; with room for the
    /// APNs, Postgres, metrics and journal ones beside them.
    private func raiseOpenFileLimit() {
        let http = HTTPServer.acceptLimit(serverConfiguration.connectionLimit)
        let apns = apnsIngress.listen == nil ? 0 : apnsIngress.maximumConnections
        let needed = http + apns + Self.descriptorsBesideConnections
        let limit = FileDescriptorLimit.raise(toAtLeast: needed)
        if limit < needed {
            logger.warning(
                "the open-file limit is below what the ingress connection limits need; accept may fail before shedding makes room",
                metadata: [
                    "open_file_limit": "\(limit)", "needed": "\(needed)", "ingress_connections": "\(http)",
                    "apns_ingress_connections": "\(apns)",
                ])
        }
    }

    /// The APNs, Postgres, metrics, journal and spool descriptors, with room.
    static let descriptorsBesideConnections = 1024

    /// Intake stops, and the requests in flight get the drain timeout.
    func stop() async {
        let (http, apns) = servers.withLock { $0 }
        drain.begin()
        logger.notice("draining: intake stopped", metadata: ["in_flight": "\(ingress.requestsInFlight)"])
        // Batches go on starting sends for the first half of the drain
        // timeout and answer the rest NotSent; at the end the APNs
        // connections close so every running send ends with a result its
        // request can still report (per item, for a batch) before the
        // server's blanket 503.
        ingress.beginDraining(batchesStartFor: drainTimeout / 2)
        let (transport, drainTimeout) = (transport, drainTimeout)
        let cutOff = Task {
            try? await Task.sleep(for: .milliseconds(Int((drainTimeout - min(2, drainTimeout / 5)) * 1000)))
            if !Task.isCancelled { await transport.close(drainTimeout: 0) }
        }
        await http?.stop(drainTimeout: drainTimeout)
        if let apns {
            // Its requests pass the same concurrency count: once none is
            // left every stream has its answer, and GOAWAY closes the rest.
            let clock = ContinuousClock()
            let deadline = drain.start + .seconds(drainTimeout)
            while ingress.requestsInFlight > 0, clock.now < deadline { try? await Task.sleep(for: .milliseconds(5)) }
            // At least a moment, even past the drain's deadline: the answers
            // already made must leave before the GOAWAY.
            await apns.stop(grace: max(1, (deadline - clock.now).seconds))
        }
        cutOff.cancel()
        await cutOff.value
    }
}
