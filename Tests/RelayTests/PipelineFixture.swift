import APNs
import Logging
import MockAPNs
import Relay
import Synchronization
import Telemetry
import Testing
import TestSupport
import Tracing

let fixedNow: Int64 = 1_700_000_000
let bundleID = "com.example.app"

/// Hands out pre-minted tokens in order; `invalidate` moves to the next one.
final class SequenceAuthorization: AuthorizationProvider {
    private let tokens: [String]
    private let index = Mutex(0)
    private let invalidations = Mutex(0)

    init(tokens: [String]) { self.tokens = tokens }

    var invalidationCount: Int { invalidations.withLock { $0 } }

    func currentAuthorization() throws -> ProviderAuthorization {
        let position = index.withLock { $0 }
        return ProviderAuthorization(headerValue: "bearer \(tokens[position])", issuedAt: fixedNow)
    }

    func invalidate(_ authorization: ProviderAuthorization) {
        invalidations.withLock { $0 += 1 }
        index.withLock { $0 = min($0 + 1, tokens.count - 1) }
    }
}

/// A client wired to an in-memory mock APNs, recording events and waits.
struct PipelineFixture {
    let engine: MockAPNsEngine
    let client: APNsClient
    let observer: RecordingObserver
    let sleeps: SleepRecorder
    /// With `realSleep`: the backoff sleeps a cancellation woke before their time.
    let cutSleeps: SleepRecorder
    let authorization: SequenceAuthorization
    let builder: RequestBuilder
    let killSwitch: KillSwitch

    /// - Parameters:
    ///   - expiredFirst: the first token handed out is over an hour old.
    ///   - realSleep: back off for real (for cancellation tests).
    init(
        rules: [MockRule] = [], expiredFirst: Bool = false, killSwitch: KillSwitch = KillSwitch(environment: { _ in nil }),
        realSleep: Bool = false, logger: Logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
        observer: RecordingObserver = RecordingObserver(), configure: (inout APNsClient.Configuration) -> Void = { _ in }
    ) throws {
        let signer = try IndependentSigner(claims: [
            ("KEYID00001", "TEAMID0001", fixedNow - (expiredFirst ? 4000 : 60)),
            ("KEYID00001", "TEAMID0001", fixedNow - 30),
        ])
        var mock = MockAPNsConfiguration()
        mock.keys = [.init(keyID: "KEYID00001", teamID: "TEAMID0001", publicKeyPEM: signer.publicKeyPEM)]
        mock.bundleIDs = [bundleID]
        mock.rules = rules
        engine = try MockAPNsEngine(configuration: mock, now: { fixedNow })
        authorization = SequenceAuthorization(tokens: signer.tokens)
        self.observer = observer
        sleeps = SleepRecorder()
        cutSleeps = SleepRecorder()
        self.killSwitch = killSwitch
        var configuration = APNsClient.Configuration(
            app: "example", environment: .development,
            endpoints: .overriding(send: Origin(host: "127.0.0.1", port: 1)))
        configure(&configuration)
        let recorder = sleeps
        let cut = cutSleeps
        let sleep: @Sendable (Double) async throws -> Void = { seconds in
            if realSleep {
                do {
                    try await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
                } catch {
                    // Woken before its time (cancelled): recorded, so a test can
                    // tell that from a sleep that ran out, without a clock.
                    try? await cut.sleep(seconds)
                    throw error
                }
            } else {
                try await recorder.sleep(seconds)
            }
        }
        client = APNsClient(
            configuration: configuration, transport: EngineTransport(engine: engine), authorization: authorization,
            killSwitch: killSwitch, observers: [observer], tracer: JSONSpanTracer(logger: logger), logger: logger,
            sleep: sleep)
        builder = try RequestBuilder(bundleID: bundleID)
    }

    func alert(token: String = String(repeating: "ab", count: 32), priority: Priority? = nil) throws -> APNsRequest {
        try builder.alert(token: token, payload: ["aps": ["alert": "hello"]], options: .init(priority: priority))
    }

    func update(token: String = String(repeating: "ab", count: 32)) throws -> APNsRequest {
        try builder.liveActivity(.update, token: token, content: .init(contentState: ["progress": 0.5]))
    }
}

/// The transport error a send that must fail ended with; records an issue
/// (and returns nil) when it succeeded or ended otherwise.
func transportFailure(
    of client: APNsClient, _ request: APNsRequest, sourceLocation: SourceLocation = #_sourceLocation
) async -> (error: TransportError, attempts: Int)? {
    do throws(SendFailure) {
        let result = try await client.send(request)
        Issue.record("the send succeeded with \(result.status)", sourceLocation: sourceLocation)
    } catch {
        if case .transport(let transport) = error.cause { return (transport, error.attempts) }
        Issue.record("the send ended with \(error.cause), not a transport failure", sourceLocation: sourceLocation)
    }
    return nil
}
