import APNs
import ArgumentParser
import Foundation
import HTTP2
import MockAPNs
import RelayBasics

/// `apns-relay mock-apns`: the APNs stand-in, on its own.
struct MockAPNsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-apns",
        abstract: "Run a mock APNs (TLS HTTP/2) that validates requests like APNs and injects faults.",
        discussion: """
            Point a client at https://HOST:PORT with the printed certificate as its trusted CA. \
            Requests are checked as APNs checks them (JWT signature, key and team, age; headers; token; \
            payload size; channels) and answered with APNs' statuses and reasons.
            """
    )

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0 picks a free one).") var port = 2197
    @Option(name: .customLong("key"), help: "A provider key the mock accepts, as KEYID:TEAMID:PATH (PATH is a .p8 or a public-key PEM). Repeatable.")
    var keys: [String] = []
    @Option(name: .customLong("bundle-id"), help: "A bundle id the keys may push to (repeatable; none accepts any).")
    var bundleIDs: [String] = []
    @Option(help: "development or production: channels exist in one environment.") var environment = "development"
    @Option(help: "Tokens starting with this hex prefix answer 410 Unregistered.") var unregisteredPrefix: String?
    @Option(help: "Delay every answer by this many milliseconds.") var delayMs = 0
    @Option(help: "Send GOAWAY after this many streams on a connection.") var goawayAfter: Int?
    @Option(help: "SETTINGS_MAX_CONCURRENT_STREAMS to advertise.") var maxConcurrentStreams = 1000
    @Option(help: "Directory for the generated certificate (default: a new temporary directory).") var certificateDirectory: String?
    @Option(help: ArgumentHelp(
        "Append one JSON line per request received to this file (apnsId, status, reason, path, body), as it arrives.",
        discussion: "For counting what reached APNs from outside (scripts/fuzz); the body and the device token in the path are written as received."))
    var requestLog: String?

    func run() async throws {
        var configuration = MockAPNsConfiguration()
        configuration.environment = environment
        configuration.bundleIDs = Set(bundleIDs)
        configuration.maxConcurrentStreams = maxConcurrentStreams
        configuration.responseDelay = delayMs > 0 ? .fixed(milliseconds: delayMs) : .none
        // This process reads only the log's totals (printed at exit), which
        // count every request whatever the capacity: keeping the last 100,000
        // requests whole cost each one an allocation kept and memory grown
        // (and 100 MB or more) for entries nothing here reads.
        configuration.logCapacity = 1000
        if let requestLog {
            let writer = try MockRequestLogWriter(path: requestLog)
            configuration.requestObserver = { writer.append($0) }
        }
        if let goawayAfter { configuration.goAwayAfterStreams = (goawayAfter, true) }
        if let prefix = unregisteredPrefix {
            configuration.rules.append(MockRule(.tokenPrefix(prefix), always: .unregistered(at: UnixTime.nowSeconds() * 1000)))
        }
        for key in keys {
            let parts = key.split(separator: ":", maxSplits: 2).map(String.init)
            guard parts.count == 3 else { throw ValidationError("--key must be KEYID:TEAMID:PATH (got \(key))") }
            configuration.keys.append(.init(keyID: parts[0], teamID: parts[1], publicKeyPEM: try Self.publicKeyPEM(at: parts[2])))
        }
        let directory = certificateDirectory ?? (NSTemporaryDirectory() + "apns-relay-mock-" + UUID().uuidString)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let server = try MockAPNsServer(engine: MockAPNsEngine(configuration: configuration), port: port, host: host, directory: directory)
        // Unbuffered: a parent reading the pipe (scripts/fuzz) waits for these lines.
        printUnbuffered("mock APNs listening on https://\(host):\(server.port)")
        printUnbuffered("trust this certificate: \(server.certificateFile)")
        printUnbuffered("keys accepted: \(configuration.keys.map { "\($0.keyID) (team \($0.teamID))" }.joined(separator: ", "))")
        _ = await SignalWaiter.waitForTermination()
        server.stop()
        let log = server.engine.log
        print("stopped after \(log.total) requests: \(log.countsByStatus.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " "))")
    }

    /// A public key PEM, taken from a .p8 (private) or used as given (public).
    static func publicKeyPEM(at path: String) throws -> String {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        if text.contains("BEGIN PUBLIC KEY") { return text }
        return try SigningKey(contentsOfFile: path).publicKeyPEM
    }
}
