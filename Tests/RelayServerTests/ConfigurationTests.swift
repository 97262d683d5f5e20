import RelayServer
import Testing

/// The configuration file as `serve` reads it: fields, ranges, the masked description.
@Suite("Relay server configuration")
struct ConfigurationTests {
    /// One app and one API key: the least a configuration file must hold.
    static let apps = """
        apps:
          - {name: a, bundle_id: com.example.a, team_id: ABCDE12345, key_id: KEY1234567, key_path: /nonexistent.p8, environments: [development]}
        api_keys:
          - {name: b, sha256: f8f4bf7056494c85a232414dbf744875d3457a9a1e995c37510506acbccffc37, apps: [a]}

        """
    @Test("ingress.request_timeout_seconds and max_connections_per_client: read, range-checked, shown")
    func configuration() throws {
        let yaml = Self.apps + "ingress:\n  request_timeout_seconds: 5\n  max_connections_per_client: 32\n"
        let configuration = try ServerConfiguration.parse(yaml: yaml, file: "/tmp/relay.yaml", environment: [:])
        #expect(configuration.ingress.requestTimeoutSeconds == 5)
        #expect(configuration.ingress.maximumConnectionsPerClient == 32)
        #expect(configuration.maskedDescription.contains("request_timeout_seconds: 5"))
        #expect(ServerConfiguration(instance: "x").ingress.requestTimeoutSeconds == 15)
        #expect(throws: ConfigurationError.self) {
            try ServerConfiguration.parse(yaml: Self.apps + "ingress:\n  request_timeout_seconds: 0\n", file: "/tmp/relay.yaml", environment: [:])
        }
    }

    @Test("ingress.batch_concurrency: unset follows max_batch_sends_running; read, range-checked, shown")
    func batchConcurrency() throws {
        let unset = try ServerConfiguration.parse(yaml: Self.apps, file: "/tmp/relay.yaml", environment: [:])
        #expect(unset.ingress.batchConcurrency == nil)
        #expect(unset.maskedDescription.contains("batch_concurrency: max_batch_sends_running / 8"))
        let set = try ServerConfiguration.parse(yaml: Self.apps + "ingress:\n  batch_concurrency: 16\n", file: "/tmp/relay.yaml", environment: [:])
        #expect(set.ingress.batchConcurrency == 16)
        #expect(set.maskedDescription.contains("batch_concurrency: 16"))
        // Zero, negative, past the range, past Int64, not an integer: each refused naming the field.
        for bad in ["0", "-1", "100001", "9223372036854775808", "1.5", "lots"] {
            do {
                _ = try ServerConfiguration.parse(yaml: Self.apps + "ingress:\n  batch_concurrency: \(bad)\n", file: "/tmp/relay.yaml", environment: [:])
                Issue.record("batch_concurrency: \(bad) was accepted")
            } catch {
                #expect("\(error)".contains("batch_concurrency"), "batch_concurrency: \(bad): \(error)")
            }
        }
    }
}
