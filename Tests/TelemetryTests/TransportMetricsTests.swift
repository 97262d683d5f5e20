import APNs
import Foundation
import MockAPNs
import Relay
import Telemetry
import TestSupport
import Testing
import RelayBasics
import HTTP2

@Suite("Transport metrics")
struct TransportMetricsTests {
    @Test("connections by origin and state, connection events and in-flight requests come from the HTTP/2 transport")
    func connections() async throws {
        let keys = try TestKeyFile()
        defer { keys.remove() }
        let key = try SigningKey(contentsOfFile: keys.path)
        var mockConfiguration = MockAPNsConfiguration()
        mockConfiguration.keys = [.init(keyID: "CONNKEY001", teamID: "CONNTEAM01", publicKeyPEM: key.publicKeyPEM)]
        let mock = try MockAPNsServer(engine: MockAPNsEngine(configuration: mockConfiguration), directory: keys.directory)
        defer { mock.stop() }
        let metrics = RelayMetrics()
        var configuration = HTTP2Transport.Configuration()
        configuration.caFile = mock.certificateFile
        let transport = HTTP2Transport(configuration: configuration) { _, event in metrics.connectionEvent(event.rawValue) }
        let credentials = try ProviderCredentials(keyID: "CONNKEY001", teamID: "CONNTEAM01", key: key)
        let authorization = ProviderToken(credentials: credentials, issuedAt: UnixTime.nowSeconds()).authorizationHeaderValue
        let origin = Origin(host: "127.0.0.1", port: mock.port)
        let request = try RequestBuilder(bundleID: "com.example.app").alert(token: String(repeating: "ab", count: 32), payload: ["aps": ["alert": "x"]])
        for _ in 0..<3 {
            let response = try await transport.send(HTTP2Request(
                method: "POST", path: request.path, authority: origin.authority,
                headers: request.headers + [HTTPHeader("authorization", authorization)], body: request.body, timeout: 5), to: origin)
            #expect(response.status == 200)
        }
        metrics.refresh(MetricSources(inflightStreams: { transport.inFlight }, connections: { transport.connectionStates }))
        let text = metrics.registry.emitToString()
        #expect(sample(text, #"apns_relay_connections{origin="https://127.0.0.1:\#(mock.port)",state="ready"}"#) == 1)
        #expect(sample(text, #"apns_relay_connections{origin="https://127.0.0.1:\#(mock.port)",state="going_away"}"#) == 0)
        #expect(sample(text, #"apns_relay_connection_events_total{event="opened"}"#) == 1)
        #expect(sample(text, "apns_relay_inflight_streams") == 0)
        await transport.close()
        metrics.refresh(MetricSources(connections: { transport.connectionStates }))
        #expect(sample(metrics.registry.emitToString(), #"apns_relay_connections{origin="https://127.0.0.1:\#(mock.port)",state="ready"}"#) == 0)
    }
}
