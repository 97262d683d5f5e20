import APNs
import Logging
import MockAPNs
import Relay
import Telemetry
import TestSupport

/// What the metrics tests share: an APNs client sending through the mock
/// engine (scripted by `rules`), with `metrics` observing it and counting JWT mints.
struct MetricsFixture {
    let keys: TestKeyFile
    let metrics = RelayMetrics()
    let killSwitch = KillSwitch(environment: { _ in nil })
    let client: APNsClient
    let builder: RequestBuilder

    /// The caller removes `keys` when done.
    init(keyID: String, teamID: String, rules: [MockRule]) throws {
        keys = try TestKeyFile()
        let credentials = try ProviderCredentials(keyID: keyID, teamID: teamID, keyPath: keys.path)
        var mockConfiguration = MockAPNsConfiguration()
        mockConfiguration.keys = [.init(keyID: keyID, teamID: teamID, publicKeyPEM: credentials.key.publicKeyPEM)]
        mockConfiguration.rules = rules
        let engine = try MockAPNsEngine(configuration: mockConfiguration)
        let metrics = metrics
        let tokens = ProviderTokenCache(credentials: credentials, onMint: { metrics.jwtMinted(app: "shop", issuedAt: $0) })
        var configuration = APNsClient.Configuration(
            app: "shop", environment: .production, endpoints: .overriding(send: Origin(host: "127.0.0.1", port: 1)))
        configuration.retryPolicy.baseDelay = 0.001
        let quiet = Logger(label: "metrics-test") { _ in SwiftLogNoOpLogHandler() }
        client = APNsClient(
            configuration: configuration, transport: EngineTransport(engine: engine), authorization: tokens, killSwitch: killSwitch,
            observers: [metrics], tracer: JSONSpanTracer(logger: quiet), logger: quiet)
        builder = try RequestBuilder(bundleID: "com.example.shop")
    }

    /// Sends one alert to `token`; the outcome shows in the metrics.
    func sendAlert(token: String) async {
        _ = try? await client.send(try builder.alert(token: token, payload: ["aps": ["alert": "hi"]]))
    }
}
