import APNs
import Foundation
import Ingress
import Logging
import MockAPNs
import Relay
import RelayJSON
import RelayServer
import Synchronization
import TestSupport

/// A relay with its ingress and metrics on loopback, sending to a mock APNs
/// over real TLS HTTP/2, as `apns-relay serve` wires it.
final class TestRelay: Sendable {
    /// Plain API keys by name; the relay holds only their SHA-256.
    static let keys = ["backend": "key-backend-0123456789", "other": "key-other-0123456789", "admin": "key-admin-0123456789", "limited": "key-limited-0123456789"]
    static let liveSnapshot = TestSnapshots.liveActivity
    static let notificationSnapshot = TestSnapshots.notification

    let mock: MockAPNsServer
    let server: RelayServer
    let directory: String
    let keyPath: String
    let publicKeyPEM: String

    var base: String { "http://127.0.0.1:\(server.ingressAddress.port)" }
    var metricsBase: String { "http://127.0.0.1:\(server.metricsAddress.port)" }
    /// Requests the mock APNs has received.
    var apnsRequests: Int { mock.engine.log.total }

    static func token(_ index: Int, prefix: String = "") -> String {
        String((prefix + String(format: "%064x", index + 1)).prefix(64))
    }

    static func start(
        rules: [MockRule] = [], databaseURL: String? = nil, instance: String = "e2e-\(UUID().uuidString.prefix(8))",
        mockDelay: MockDelay = .none, logs: CollectedLogs? = nil, configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> TestRelay {
        let directory = NSTemporaryDirectory() + "apns-relay-e2e-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let keyPath = directory + "/AuthKey_E2EKEY1234.p8"
        let pem = SigningKey.generatePKCS8PEM()
        FileManager.default.createFile(atPath: keyPath, contents: Data(pem), attributes: [.posixPermissions: 0o600])
        let publicKeyPEM = try SigningKey(pem: pem).publicKeyPEM
        var mockConfiguration = MockAPNsConfiguration()
        mockConfiguration.keys = [.init(keyID: "E2EKEY1234", teamID: "E2ETEAM123", publicKeyPEM: publicKeyPEM)]
        mockConfiguration.bundleIDs = ["com.example.a", "com.example.b"]
        mockConfiguration.rules = rules
        mockConfiguration.responseDelay = mockDelay
        let mock = try MockAPNsServer(engine: MockAPNsEngine(configuration: mockConfiguration), directory: directory)

        var configuration = ServerConfiguration(instance: instance)
        configuration.ingress.listen = .init(host: "127.0.0.1", port: 0)
        configuration.metrics.listen = .init(host: "127.0.0.1", port: 0)
        configuration.ingress.maximumBodyBytes = 64 * 1024
        configuration.apns.origins[.development] = Origin(host: "127.0.0.1", port: mock.port)
        configuration.apns.caFile = mock.certificateFile
        configuration.retry.baseDelay = 0.01
        configuration.apps = [
            AppConfiguration(name: "app-a", bundleID: "com.example.a", teamID: "E2ETEAM123", keyID: "E2EKEY1234", keyPath: keyPath, environments: [.development]),
            AppConfiguration(name: "app-b", bundleID: "com.example.b", teamID: "E2ETEAM123", keyID: "E2EKEY1234", keyPath: keyPath, environments: [.development]),
        ]
        func key(_ name: String, apps: Set<String>?, admin: Bool = false, rate: Double? = nil, burst: Double? = nil) -> APIKey {
            APIKey(name: name, sha256Hex: Fingerprint.sha256Hex(Array(keys[name]!.utf8)), apps: apps, isAdmin: admin, ratePerSecond: rate, burst: burst)!
        }
        configuration.apiKeys = [
            key("backend", apps: ["app-a"]), key("other", apps: ["app-b"]), key("admin", apps: nil, admin: true),
            // One token per 1000 s: the third request is refused however slowly the machine runs.
            key("limited", apps: ["app-a"], rate: 0.001, burst: 2),
        ]
        configuration.audit.databaseURL = databaseURL
        configuration.audit.spoolDirectory = directory + "/spool"
        configure(&configuration)
        var logger = logs.map { logs in Logger(label: "e2e") { _ in logs.handler } } ?? Logger(label: "e2e")
        logger.logLevel = logs == nil ? .critical : .notice
        let server: RelayServer
        do {
            server = try await RelayServer.start(RelayComponents(configuration: configuration, logger: logger))
        } catch {
            // A relay that did not start leaves no mock behind either.
            mock.stop()
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        return TestRelay(mock: mock, server: server, directory: directory, keyPath: keyPath, publicKeyPEM: publicKeyPEM)
    }

    private init(mock: MockAPNsServer, server: RelayServer, directory: String, keyPath: String, publicKeyPEM: String) {
        self.mock = mock
        self.server = server
        self.directory = directory
        self.keyPath = keyPath
        self.publicKeyPEM = publicKeyPEM
    }

    func stop() async {
        await server.drain()
        mock.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// What curl saw.
    struct Answer: CustomStringConvertible {
        var status: Int
        var headers: [String: String]
        var body: String
        var json: JSONValue? { try? JSONParser.parse(body) }
        var error: JSONValue? { json?["error"] }
        var description: String { "\(status) \(body)" }
    }

    /// One request through curl, an HTTP client nobody here wrote.
    func curl(_ method: String, _ path: String, key: String? = "backend", body: String? = nil, headers: [String] = [], base: String? = nil) async throws -> Answer {
        // The limit is a safety net, not an expectation: on two cores other suites'
        // CPU-heavy tests can hold the cooperative pool for tens of seconds.
        var arguments = ["curl", "-s", "-S", "-i", "-X", method, "--max-time", "120"]
        if let key { arguments += ["-H", "authorization: Bearer \(TestRelay.keys[key] ?? key)"] }
        if body != nil {
            if !headers.contains(where: { $0.lowercased().hasPrefix("content-type:") }) { arguments += ["-H", "content-type: application/json"] }
            arguments += ["--data-binary", "@-"]
        }
        for header in headers { arguments += ["-H", header] }
        arguments.append((base ?? self.base) + path)
        let (status, output) = try await ProcessRunner.runOffPool(arguments, input: body.map { Data($0.utf8) })
        guard status == 0 else { throw TestRelayError("curl failed (\(status)): \(output)") }
        return try Self.parse(output)
    }

    static func parse(_ output: String) throws -> Answer {
        guard let split = output.range(of: "\r\n\r\n") else { throw TestRelayError("no header end in: \(output)") }
        let head = output[..<split.lowerBound].split(separator: "\r\n")
        guard let statusLine = head.first, let status = Int(statusLine.split(separator: " ")[1]) else { throw TestRelayError("bad status line") }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Answer(status: status, headers: headers, body: String(output[split.upperBound...]))
    }

    /// A `/v1/send` body.
    static func send(_ operation: String = "alert", app: String = "app-a", token: String = TestRelay.token(1), snapshot: String = liveSnapshot, extra: String = "") -> String {
        #"{"app":"\#(app)","environment":"development","operation":"\#(operation)","token":"\#(token)","snapshot":\#(snapshot)\#(extra)}"#
    }
}

struct TestRelayError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body` against a fresh relay and stops it afterwards, whatever happens.
func withRelay(
    rules: [MockRule] = [], databaseURL: String? = nil, mockDelay: MockDelay = .none, logs: CollectedLogs? = nil,
    configure: (inout ServerConfiguration) -> Void = { _ in }, _ body: (TestRelay) async throws -> Void
) async throws {
    let relay = try await TestRelay.start(rules: rules, databaseURL: databaseURL, mockDelay: mockDelay, logs: logs, configure: configure)
    do {
        try await body(relay)
    } catch {
        await relay.stop()
        throw error
    }
    await relay.stop()
}

/// What an in-process relay logs at `notice` and above, one line each
/// (message and metadata), for a test to say why it failed: the relay's
/// own account of a drain (`drained`, with the audit's counts) or of an
/// audit write is otherwise lost.
final class CollectedLogs: Sendable {
    private let lines = Mutex<[String]>([])

    var all: [String] { lines.withLock { $0 } }

    var handler: some LogHandler { Handler(logs: self) }

    private struct Handler: LogHandler {
        let logs: CollectedLogs
        var metadata: Logger.Metadata = [:]
        var metadataProvider: Logger.MetadataProvider?
        var logLevel: Logger.Level = .notice

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let fields = metadata.merging(event.metadata ?? [:]) { $1 }.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            let line = "\(event.level) \(event.message) \(fields.joined(separator: " "))"
            logs.lines.withLock { $0.append(line) }
        }
    }
}
