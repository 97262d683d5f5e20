import APNs
import Foundation
import Ingress
import Logging
import MockAPNs
import Relay
import RelayServer
import RelayBasics

/// A relay wired to a mock APNs on loopback, with a generated key and API
/// keys: what `apns-relay demo` and `apns-relay bench ingress` run against.
struct DemoEnvironment {
    static let app = "demo-app"
    static let bundleID = "com.example.demo"
    static let keyID = "DEMOKEY123"
    static let teamID = "DEMOTEAM12"
    /// Tokens starting with these answer 410 Unregistered / 429 twice, then 200.
    static let deadTokenPrefix = "dead"
    static let busyTokenPrefix = "beef"

    let directory: String
    let mock: MockAPNsServer
    let server: RelayServer
    /// The plain API keys (the relay only holds their SHA-256).
    let apiKey: String
    let adminKey: String

    var ingressPort: UInt16 { server.ingressAddress.port }

    static func start(
        databaseURL: String?, ingressPort: UInt16 = 0, metricsPort: UInt16 = 0, mockDelayMilliseconds: Int = 0, logger: Logger,
        scriptedFaults: Bool = true, auditDirectory: String? = nil, recordsAudit: Bool = true,
        tracing: ServerConfiguration.TracingSettings = .init()
    ) async throws -> DemoEnvironment {
        let directory = NSTemporaryDirectory() + "apns-relay-demo-" + String(UUID().uuidString.prefix(8)).lowercased()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let keyPath = directory + "/AuthKey_\(keyID).p8"
        let pem = SigningKey.generatePKCS8PEM()
        guard FileManager.default.createFile(atPath: keyPath, contents: Data(pem), attributes: [.posixPermissions: 0o600]) else {
            throw DemoFailure("cannot write the demo key to \(keyPath)")
        }

        var mockConfiguration = MockAPNsConfiguration()
        mockConfiguration.environment = "development"
        mockConfiguration.bundleIDs = [bundleID]
        mockConfiguration.keys = [.init(keyID: keyID, teamID: teamID, publicKeyPEM: try SigningKey(pem: pem).publicKeyPEM)]
        mockConfiguration.responseDelay = mockDelayMilliseconds > 0 ? .fixed(milliseconds: mockDelayMilliseconds) : .none
        if scriptedFaults {
            mockConfiguration.rules = [
                MockRule(.tokenPrefix(deadTokenPrefix), always: .unregistered(at: UnixTime.nowSeconds() * 1000 - 3_600_000)),
                MockRule(.tokenPrefix(busyTokenPrefix), [.tooManyRequests(), .tooManyRequests(), .succeed]),
            ]
        }
        let mock = try MockAPNsServer(engine: MockAPNsEngine(configuration: mockConfiguration), directory: directory)

        let apiKey = "demo-" + UUID().uuidString.lowercased()
        let adminKey = "demo-admin-" + UUID().uuidString.lowercased()
        var configuration = ServerConfiguration(instance: "demo")
        configuration.ingress.listen = .init(host: "127.0.0.1", port: ingressPort)
        configuration.metrics.listen = .init(host: "127.0.0.1", port: metricsPort)
        configuration.apns.origins[.development] = Origin(host: "127.0.0.1", port: mock.port)
        configuration.apns.caFile = mock.certificateFile
        configuration.apps = [AppConfiguration(name: app, bundleID: bundleID, teamID: teamID, keyID: keyID, keyPath: keyPath, environments: [.development])]
        configuration.apiKeys = [
            APIKeyConfiguration.key(name: "demo-backend", plain: apiKey, admin: false),
            APIKeyConfiguration.key(name: "demo-oncall", plain: adminKey, admin: true),
        ]
        configuration.audit.databaseURL = databaseURL
        configuration.audit.spoolDirectory = auditDirectory ?? directory + "/spool"
        configuration.drainTimeoutSeconds = 10
        configuration.tracing = tracing
        do {
            let components = try RelayComponents(configuration: configuration, logger: logger, recordsAudit: recordsAudit)
            let server = try await RelayServer.start(components)
            return DemoEnvironment(directory: directory, mock: mock, server: server, apiKey: apiKey, adminKey: adminKey)
        } catch {
            mock.stop()
            throw error
        }
    }

    func stop() async {
        await server.drain()
        mock.stop()
    }
}

struct DemoFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

enum APIKeyConfiguration {
    /// An API key entry for a plain key (hashed here, as an operator would with sha256sum).
    static func key(name: String, plain: String, admin: Bool) -> APIKey {
        APIKey(name: name, sha256Hex: Fingerprint.sha256Hex(Array(plain.utf8)), apps: nil, isAdmin: admin)!
    }
}
