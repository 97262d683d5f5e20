import APNs
import Foundation
import HTTP2
import Logging
import MockAPNs
import Relay
import RelayJSON
import Synchronization
import Telemetry
import TestSupport
import Testing

/// The relay's client, signing real JWTs, over real TLS HTTP/2 to the mock APNs on loopback.
struct WireFixture {
    let keys: TestKeyFile
    let mock: MockAPNsServer
    let transport: HTTP2Transport
    let client: APNsClient
    let builder: RequestBuilder
    let observer = RecordingObserver()
    let tokens: ProviderTokenCache

    init(
        rules: [MockRule] = [], goAwayEvery: Int? = nil, logger: Logger = Logger(label: "e2e") { _ in SwiftLogNoOpLogHandler() },
        configure: (inout APNsClient.Configuration) -> Void = { _ in }
    ) throws {
        keys = try TestKeyFile()
        let credentials = try ProviderCredentials(keyID: "KEYE2E0001", teamID: "TEAME2E001", keyPath: keys.path)
        tokens = ProviderTokenCache(credentials: credentials)
        var configuration = MockAPNsConfiguration()
        configuration.keys = [.init(keyID: "KEYE2E0001", teamID: "TEAME2E001", publicKeyPEM: credentials.key.publicKeyPEM)]
        configuration.bundleIDs = ["com.example.app"]
        configuration.rules = rules
        if let goAwayEvery { configuration.goAwayAfterStreams = (goAwayEvery, true) }
        mock = try MockAPNsServer(engine: MockAPNsEngine(configuration: configuration), directory: keys.directory)
        var transportConfiguration = HTTP2Transport.Configuration()
        transportConfiguration.caFile = mock.certificateFile
        transport = HTTP2Transport(configuration: transportConfiguration)
        var clientConfiguration = APNsClient.Configuration(
            app: "example", environment: .development, endpoints: .overriding(send: Origin(host: "127.0.0.1", port: mock.port)))
        clientConfiguration.retryPolicy.baseDelay = 0.001
        clientConfiguration.retryPolicy.maxDelay = 0.01
        configure(&clientConfiguration)
        client = APNsClient(
            configuration: clientConfiguration, transport: transport, authorization: tokens,
            killSwitch: KillSwitch(environment: { _ in nil }), observers: [observer], tracer: JSONSpanTracer(logger: logger), logger: logger)
        builder = try RequestBuilder(bundleID: "com.example.app")
    }

    func stop() async {
        await transport.close()
        mock.stop()
        keys.remove()
    }
}

@Suite("End to end over TLS HTTP/2 to the mock APNs")
struct EndToEndTransportTests {
    @Test("an alert goes out signed, verified by the mock, and comes back 200")
    func alert() async throws {
        let wire = try WireFixture()
        let request = try wire.builder.alert(token: String(repeating: "ab", count: 32), payload: ["aps": ["alert": "hello"]])
        let result = try await wire.client.send(request)
        #expect(result.status == 200)
        #expect(result.apnsUniqueID != nil)
        let logged = try #require(wire.mock.engine.log.entries.first)
        #expect(logged.request.header("apns-topic") == "com.example.app")
        #expect(logged.request.header("authorization")?.hasPrefix("bearer ") == true)
        #expect(wire.mock.engine.signatureVerifications == 1)
        #expect(wire.tokens.mintCount == 1)
        await wire.stop()
    }

    @Test("1,000 mixed sends through GOAWAY every 100 streams: exactly one result each, counts add up")
    func mixedRunThroughGoAway() async throws {
        let wire = try WireFixture(
            rules: [
                MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1_700_000_000_000)),
                MockRule(.tokenPrefix("f1a7"), [.reject(reason: "ServiceUnavailable"), .succeed]),
            ],
            goAwayEvery: 100)
        let prefixes = ["dead", "f1a7", "0000", "1111"]
        let requests = try (0..<1_000).map { index in
            try wire.builder.liveActivity(
                .update, token: prefixes[index % 4] + String(format: "%060d", index), content: .init(contentState: ["n": .integer(Int64(index))]))
        }
        let successes = await withTaskGroup(of: Bool.self) { group in
            for request in requests { group.addTask { (try? await wire.client.send(request)) != nil } }
            var count = 0
            for await ok in group where ok { count += 1 }
            return count
        }
        #expect(successes == 750)
        let sends = wire.observer.sendEvents
        #expect(sends.count == 1_000)
        #expect(Set(sends.map(\.send.apnsID)).count == 1_000)
        #expect(sends.filter { $0.outcome == .rejected && $0.reason == "Unregistered" }.count == 250)
        #expect(sends.reduce(0) { $0 + $1.attempts } == wire.observer.attemptEvents.count)
        #expect(wire.mock.acceptedConnections >= 10, "GOAWAY every 100 streams forces new connections")
        await wire.stop()
    }

    @Test("no raw token, JWT, key or bearer value appears anywhere in the logs and spans of a mixed run")
    func noSecretsInLogs() async throws {
        let lines = Mutex<[String]>([])
        let sink = LogSink { line in lines.withLock { $0.append(String(decoding: line, as: UTF8.self)) } }
        let logger = Logger(label: "e2e") { JSONLogHandler(label: $0, sink: sink, level: .trace) }
        let wire = try WireFixture(rules: [MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1))], logger: logger)
        let tokens = ["dead" + String(repeating: "7", count: 60), String(repeating: "c3", count: 32)]
        for token in tokens {
            _ = try? await wire.client.send(try wire.builder.alert(token: token, payload: ["aps": ["alert": "x"]]))
        }
        let jwt = String(wire.tokens.current().authorizationHeaderValue.dropFirst("bearer ".count))
        let pem = try String(contentsOfFile: wire.keys.path, encoding: .utf8)
        let all = lines.withLock { $0 }
        #expect(all.count >= 4, "spans were logged")
        for line in all {
            for token in tokens { #expect(!line.contains(token)) }
            #expect(!line.contains(jwt))
            #expect(!line.contains(String(jwt.split(separator: ".")[2])))
            #expect(!line.lowercased().contains("bearer"))
            #expect(!line.contains(pem.split(separator: "\n")[1]))
        }
        #expect(all.contains { $0.contains(Fingerprint.of(tokens[1])) }, "tokens appear as fingerprints")
        await wire.stop()
    }
}

@Suite("The mock APNs under h2load")
struct MockUnderH2LoadTests {
    @Test("h2load with a valid JWT: every request validated and answered 200")
    func h2loadAgainstMock() async throws {
        let wire = try WireFixture()
        let jwt = wire.tokens.current().authorizationHeaderValue
        let token = String(repeating: "ab", count: 32)
        let body = wire.keys.directory + "/payload.json"
        try #"{"aps":{"alert":"bench"}}"#.write(toFile: body, atomically: true, encoding: .utf8)
        let (_, output) = try await ProcessRunner.runOffPool([
            "h2load", "-n", "3000", "-c", "2", "-m", "50", "-d", body,
            "-H", "authorization: \(jwt)", "-H", "apns-topic: com.example.app", "-H", "apns-push-type: alert",
            "https://127.0.0.1:\(wire.mock.port)/3/device/\(token)",
        ])
        #expect(output.contains("3000 succeeded, 0 failed, 0 errored"), "\(output)")
        #expect(output.contains("status codes: 3000 2xx"), "\(output)")
        #expect(wire.mock.engine.log.countsByStatus == [200: 3000])
        #expect(wire.mock.engine.signatureVerifications == 1, "one distinct JWT, verified once")
        await wire.stop()
    }
}
