public import APNs
public import Instrumentation
public import Logging
import RelayJSON
import Surfaces
public import Tracing
import Synchronization

/// The relay: many apps in one process, one client per (key, environment,
/// bundle id), every operation validated before any I/O.
///
/// Credentials are loaded and checked when the service is built, so a
/// missing key id or a bundle id with the Live Activity suffix stops the
/// relay at start-up (MS028, MS018) instead of failing the first send.
public final class RelayService: Sendable {
    public let configuration: RelayConfiguration
    public let killSwitch: KillSwitch
    let clients: [ClientKey: APNsClient]
    /// Each app's request builder and environments, by name: found with one
    /// lookup per send (the app's configuration was searched for in a copy of
    /// `configuration.apps` on every send).
    let builders: [String: AppBuilder]
    /// Split once here into durable and plain (``RelayObservers``), not per send.
    let observers: RelayObservers
    let logger: Logger
    /// Spans sends refused before any attempt, so their rows carry a trace id too.
    let tracer: any Tracer
    let timestamps: TimestampGuard
    /// Watches APNs' Date header across every client.
    public let clockSkew: ClockSkewMonitor
    let inFlight = Atomic<Int>(0)

    /// Sends accepted and not yet finished (their event not yet published).
    /// A drain waits for zero before it closes the audit.
    public var sendsInFlight: Int { inFlight.load(ordering: .acquiring) }

    /// - Throws: ``CredentialError`` or ``APNsError`` (preflight) for the first misconfigured app.
    public init(
        configuration: RelayConfiguration, transport: any APNsTransport, killSwitch: KillSwitch = KillSwitch(),
        observers: [any RelayObserver] = [], tracer: any Tracer, logger: Logger,
        jwtMinted: (@Sendable (_ app: String, _ issuedAt: Int64) -> Void)? = nil
    ) throws {
        self.configuration = configuration
        self.killSwitch = killSwitch
        self.observers = RelayObservers(observers)
        self.logger = logger
        self.tracer = tracer
        timestamps = TimestampGuard(capacity: configuration.timestampMemory)
        clockSkew = ClockSkewMonitor(logger: logger)
        var clients: [ClientKey: APNsClient] = [:]
        var builders: [String: AppBuilder] = [:]
        var seen = Set<String>()
        for app in configuration.apps {
            guard seen.insert(app.name).inserted else {
                throw CredentialError(.missing, field: "apps.\(app.name)", message: "app \(app.name) is configured twice")
            }
            try ProviderCredentials.checkBundleID(app.bundleID)
            builders[app.name] = AppBuilder(
                builder: try RequestBuilder(bundleID: app.bundleID, now: configuration.now, maximumTimestampLead: configuration.maximumTimestampLead),
                environments: app.environments)
            let credentials = try ProviderCredentials(keyID: app.keyID, teamID: app.teamID, keyPath: app.keyPath)
            for environment in app.environments {
                let name = app.name
                var onMint: (@Sendable (Int64) -> Void)?
                if let jwtMinted { onMint = { issuedAt in jwtMinted(name, issuedAt) } }
                let tokens = ProviderTokenCache(credentials: credentials, onMint: onMint)
                var clientConfiguration = APNsClient.Configuration(
                    app: app.name, environment: environment,
                    endpoints: configuration.endpointOverrides[environment] ?? APNsEndpoints(environment: environment))
                clientConfiguration.retryPolicy = configuration.retryPolicy
                clientConfiguration.requestTimeout = configuration.requestTimeout
                clientConfiguration.sendDeadline = configuration.sendDeadline
                clients[Self.key(app.name, environment)] = APNsClient(
                    configuration: clientConfiguration, transport: transport, authorization: tokens, killSwitch: killSwitch,
                    observers: observers, tracer: tracer, logger: logger, clockSkew: clockSkew)
            }
        }
        self.clients = clients
        self.builders = builders
    }

    /// An app's request builder with the environments it is configured for.
    struct AppBuilder {
        let builder: RequestBuilder
        let environments: Set<Environment>
    }

    /// Which client sends for an app to an environment: a pair, not a
    /// joined string, so finding it per send builds no string.
    struct ClientKey: Hashable {
        let app: String
        let environment: Environment
    }

    static func key(_ app: String, _ environment: Environment) -> ClientKey { ClientKey(app: app, environment: environment) }

    /// The apps the relay serves, by name.
    public var appNames: [String] { configuration.apps.map(\.name).sorted() }

    /// Whether the relay serves an app called `app` (``appNames`` without sorting them per request).
    public func serves(app: String) -> Bool { builders[app] != nil }

    /// Returns once every send event published so far is durable with the
    /// durable observers (the audit journal). A front end that reported a
    /// refusal with ``recordRefusal(_:app:environment:operation:context:)``
    /// awaits this before it answers.
    public func waitUntilRecorded() async {
        await observers.waitUntilDurable()
    }

    /// Builds the exact APNs request for an operation without sending it.
    public func describe(app: String, environment: Environment, _ operation: RelayOperation) throws(SendFailure) -> RequestDescription {
        let (request, _) = try prepare(app: app, environment: environment, operation, apnsID: nil)
        let endpoints = configuration.endpointOverrides[environment] ?? APNsEndpoints(environment: environment)
        return request.describe(endpoints: endpoints)
    }

    /// Validates, signs, sends and retries one operation. Exactly one
    /// ``SendEvent`` reaches the observers, whatever happens, including
    /// sends refused before any I/O (with zero attempts).
    public func send(app: String, environment: Environment, _ operation: RelayOperation, context: SendContext = SendContext()) async throws(SendFailure) -> SendResult {
        inFlight.add(1, ordering: .acquiringAndReleasing)
        defer { inFlight.subtract(1, ordering: .acquiringAndReleasing) }
        let prepared: (APNsRequest, (String, Int64)?)
        do {
            prepared = try prepare(app: app, environment: environment, operation, apnsID: nil, context: context)
        } catch {
            // A refusal is answered too: its row is durable first.
            await waitUntilRecorded()
            throw error
        }
        let (request, activityKey) = prepared
        guard let client = clients[Self.key(app, environment)] else {
            let failure = refuseUnserved(app: app, environment: environment, operation: operation, context: context)
            await waitUntilRecorded()
            throw failure
        }
        let result = try await client.send(request, context: Self.sendContext(context, for: operation))
        if let (key, timestamp) = activityKey { timestamps.record(key: key, timestamp: timestamp) }
        return result
    }

    /// The context a send records: the caller's, with the operation's
    /// snapshot and surface ids where the caller named none.
    static func sendContext(_ context: SendContext, for operation: RelayOperation) -> SendContext {
        var context = context
        if context.snapshotID == nil { context.snapshotID = operation.snapshot?.id }
        if context.surfaceID == nil { context.surfaceID = operation.snapshot?.surfaceID }
        return context
    }

    /// Refuses (and reports) a send to an environment the app has no client for.
    func refuseUnserved(app: String, environment: Environment, operation: RelayOperation, context: SendContext) -> SendFailure {
        refuse(.configuration("app \(app) does not send to \(environment.rawValue)"), app: app, environment: environment, operation: operation, context: context)
    }
}
