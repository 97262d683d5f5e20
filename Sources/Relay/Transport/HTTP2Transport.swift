public import APNs
public import HTTP2
import Synchronization

/// The production transport: a pool of TLS HTTP/2 connections per origin.
public final class HTTP2Transport: APNsTransport {
    /// Settings applied to every origin's pool.
    public struct Configuration: Sendable {
        /// Connections per origin.
        public var connectionsPerOrigin = 2
        /// Our cap on streams per connection (``HTTP2Connection/Configuration/maxConcurrentStreams``);
        /// the peer's SETTINGS may lower it.
        public var maxConcurrentStreams = 1000
        public var queueCapacity = 10_000
        public var idleTimeout = 60.0
        public var pingInterval = 30.0
        /// A CA bundle to trust instead of the system store: tests and the mock only.
        public var caFile: String?

        public init() {}
    }

    public let configuration: Configuration
    private let observer: HTTP2EventObserver?
    private let pools = Mutex<[Origin: HTTP2Pool]>([:])
    /// Set by close(): later sends fail at once instead of opening new pools
    /// (a retry after the close would otherwise reconnect and outlive the drain).
    private let isClosed = Atomic<Bool>(false)

    public init(configuration: Configuration = Configuration(), observer: HTTP2EventObserver? = nil) {
        self.configuration = configuration
        self.observer = observer
    }

    /// Hands `request` to `origin`'s pool as it is; only a failure is
    /// translated (``convert(_:)``), into the retry engine's terms.
    public func send(_ request: HTTP2Request, to origin: Origin) async throws(TransportError) -> HTTP2Response {
        guard !isClosed.load(ordering: .acquiring) else { throw TransportError(.closed, "the relay is shutting down") }
        do {
            return try await pool(for: origin).send(request)
        } catch {
            throw Self.convert(error)
        }
    }

    /// Connections per origin and state, for `apns_relay_connections`.
    public var connectionStates: [(origin: String, state: String, count: Int)] {
        pools.withLock { pools in
            pools.flatMap { origin, pool in pool.connectionStates.map { (origin.description, $0.key, $0.value) } }
        }
    }

    /// Requests queued or in flight across every pool, for `apns_relay_inflight_streams`.
    public var inFlight: Int { pools.withLock { $0.values.reduce(0) { $0 + $1.load } } }

    /// Closes every pool, draining in-flight requests for up to `drainTimeout` seconds.
    public func close(drainTimeout: Double = 5) async {
        isClosed.store(true, ordering: .releasing)
        let all = pools.withLock { pools in
            defer { pools.removeAll() }
            return Array(pools.values)
        }
        await withTaskGroup(of: Void.self) { group in
            for pool in all { group.addTask { await pool.close(drainTimeout: drainTimeout) } }
        }
    }

    private func pool(for origin: Origin) -> HTTP2Pool {
        pools.withLock { pools in
            if let pool = pools[origin] { return pool }
            var connection = HTTP2Connection.Configuration(host: origin.host, port: origin.port)
            connection.tls = TLSClientConfiguration(caFile: configuration.caFile)
            connection.maxConcurrentStreams = configuration.maxConcurrentStreams
            connection.queueCapacity = configuration.queueCapacity
            connection.idleTimeout = configuration.idleTimeout
            connection.pingInterval = configuration.pingInterval
            var poolConfiguration = HTTP2Pool.Configuration(connection: connection)
            poolConfiguration.size = configuration.connectionsPerOrigin
            // One thread for the origin's connections: the relay's rates are
            // far below one loop thread's ceiling, and it wakes less per send.
            poolConfiguration.sharesOneThread = true
            let pool = HTTP2Pool(configuration: poolConfiguration, observer: observer)
            pools[origin] = pool
            return pool
        }
    }

    static func convert(_ error: HTTP2Error) -> TransportError {
        let kind: TransportError.Kind = switch error.code {
        case .timeout: .timeout
        case .unprocessed, .notSent: .unprocessed
        case .queueFull: .queueFull
        case .tls, .noHTTP2: .tls
        case .cancelled: .cancelled
        case .closed: .closed
        default: .connection
        }
        return TransportError(kind, error.message, mayHaveReachedAPNs: error.requestWritten)
    }
}
