import APNs
import Logging
import MockAPNs
import Relay
import RelayJSON
import Surfaces
import Telemetry
import TestSupport
import Testing

let liveSnapshot = try! LiveSurfaceSnapshot(parsing: Array(#"""
{"schemaVersion":"5","kind":"liveActivity","id":"job-1@3","surfaceId":"job-1","updatedAt":"2026-05-12T18:30:00Z","state":"active",
 "liveActivity":{"title":"Build running","body":"Step 3 of 5","progress":0.6,"deepLink":"myapp://job/1","modeLabel":"active","stage":"inProgress"}}
"""#.utf8))
let notificationSnapshot = try! LiveSurfaceSnapshot(parsing: Array(#"""
{"schemaVersion":"5","kind":"notification","id":"n-1","surfaceId":"n","updatedAt":"2026-05-12T18:30:00Z","state":"active",
 "notification":{"title":"Done","body":"Your build finished","deepLink":"myapp://job/1","interruptionLevel":"timeSensitive"}}
"""#.utf8))

/// A relay with one app whose key is registered with an in-memory mock APNs.
struct ServiceFixture {
    let keys: TestKeyFile
    let engine: MockAPNsEngine
    let service: RelayService
    let observer = RecordingObserver()

    init(
        timestampPolicy: TimestampPolicy = .reject, rules: [MockRule] = [], now: (@Sendable () -> Int64)? = nil,
        moreObservers: (MockAPNsEngine) -> [any RelayObserver] = { _ in [] }
    ) throws {
        keys = try TestKeyFile()
        let key = try SigningKey(contentsOfFile: keys.path)
        var mock = MockAPNsConfiguration()
        mock.keys = [.init(keyID: "SVCKEY0001", teamID: "SVCTEAM001", publicKeyPEM: key.publicKeyPEM)]
        mock.bundleIDs = ["com.example.app"]
        mock.rules = rules
        engine = try MockAPNsEngine(configuration: mock)
        var configuration = RelayConfiguration(apps: [
            AppConfiguration(name: "example", bundleID: "com.example.app", teamID: "SVCTEAM001", keyID: "SVCKEY0001", keyPath: keys.path, environments: [.development]),
        ])
        configuration.timestampPolicy = timestampPolicy
        configuration.retryPolicy.baseDelay = 0.001
        if let now { configuration.now = now }
        let quiet = Logger(label: "service") { _ in SwiftLogNoOpLogHandler() }
        service = try RelayService(
            configuration: configuration, transport: EngineTransport(engine: engine), killSwitch: KillSwitch(environment: { _ in nil }),
            observers: [observer] + moreObservers(engine), tracer: JSONSpanTracer(logger: quiet), logger: quiet)
    }
}

let activityToken = String(repeating: "5a", count: 40)
let deviceToken = String(repeating: "d1", count: 32)

@Suite("Relay service: many apps, every operation")
struct RelayServiceTests {
    @Test("a timestamp past the relay's (injected) clock by more than the lead is refused, and does not block later updates")
    func timestampLead() async throws {
        let fixture = try ServiceFixture(now: { 1_800_000_000 })
        defer { fixture.keys.remove() }
        func update(_ timestamp: Int64) async throws(SendFailure) -> SendResult {
            try await fixture.service.send(app: "example", environment: .development, .update(token: activityToken, snapshot: liveSnapshot, live: .init(timestamp: timestamp)))
        }
        for refused: Int64 in [99_999_999_999, 1_800_003_601] {
            do {
                _ = try await update(refused)
                Issue.record("timestamp \(refused) was accepted")
            } catch {
                guard case .apns(let error) = error.cause else { Issue.record("\(error)"); continue }
                #expect(error.field == "aps.timestamp" && error.status == 400 && error.code == .badDate, "\(error)")
            }
        }
        #expect(try await update(1_800_000_000).status == 200)
        #expect(try await update(1_800_003_600).status == 200, "exactly the lead is allowed")
        #expect(fixture.engine.log.total == 2)
    }

    @Test("misconfigured apps stop the relay at start-up, naming the field")
    func startupChecks() throws {
        let keys = try TestKeyFile()
        defer { keys.remove() }
        let quiet = Logger(label: "x") { _ in SwiftLogNoOpLogHandler() }
        func build(_ app: AppConfiguration) throws {
            _ = try RelayService(configuration: RelayConfiguration(apps: [app]), transport: EngineTransport(engine: try MockAPNsEngine(configuration: .init())), tracer: JSONSpanTracer(logger: quiet), logger: quiet)
        }
        #expect { try build(AppConfiguration(name: "a", bundleID: "com.a", teamID: "TEAM000001", keyID: nil, keyPath: keys.path)) } throws: {
            ($0 as? CredentialError)?.trapID == .missingConfiguration && ($0 as? CredentialError)?.field == "keyId"
        }
        #expect { try build(AppConfiguration(name: "a", bundleID: "com.a.push-type.liveactivity", teamID: "TEAM000001", keyID: "KEY0000001", keyPath: keys.path)) } throws: {
            ($0 as? APNsError)?.trapID == .malformedTopic
        }
        #expect { try build(AppConfiguration(name: "a", bundleID: "com.a", teamID: "TEAM000001", keyID: "KEY0000001", keyPath: keys.directory + "/missing.p8")) } throws: {
            ($0 as? CredentialError)?.code == .keyFileMissing
        }
    }

    @Test("each operation builds its request from the snapshot and APNs (the mock) accepts it")
    func operations() async throws {
        let fixture = try ServiceFixture()
        defer { fixture.keys.remove() }
        let service = fixture.service
        #expect(try await service.send(app: "example", environment: .development, .alert(token: deviceToken, snapshot: liveSnapshot)).status == 200)
        #expect(try await service.send(app: "example", environment: .development, .notification(token: deviceToken, snapshot: notificationSnapshot)).status == 200)
        #expect(try await service.send(app: "example", environment: .development, .start(token: activityToken, snapshot: liveSnapshot)).status == 200)
        #expect(try await service.send(app: "example", environment: .development, .update(token: activityToken, snapshot: liveSnapshot, live: .init(timestamp: 1_700_000_100))).status == 200)
        #expect(try await service.send(app: "example", environment: .development, .end(token: activityToken, snapshot: liveSnapshot, live: .init(timestamp: 1_700_000_200))).status == 200)
        let created = try await service.send(app: "example", environment: .development, .createChannel(storagePolicy: .noStorage))
        #expect(created.status == 201)
        let channel = try #require(created.channelID)
        #expect(try await service.send(app: "example", environment: .development, .broadcast(channelID: channel, snapshot: liveSnapshot)).status == 200)
        let listed = try await service.send(app: "example", environment: .development, .listChannels)
        #expect(try JSONParser.parse(listed.body)["channels"] == [.string(channel)])
        #expect(try await service.send(app: "example", environment: .development, .deleteChannel(channelID: channel)).status == 204)

        let entries = fixture.engine.log.entries
        #expect(entries.count == 9)
        let notification = try JSONParser.parse(entries[1].request.body)
        #expect(notification["aps"]?["interruption-level"] == "time-sensitive")
        let start = try JSONParser.parse(entries[2].request.body)
        #expect(start["aps"]?["attributes-type"] == "MobileSurfacesActivityAttributes")
        #expect(start["aps"]?["content-state"]?["headline"] == "Build running")
        #expect(entries[2].request.header("apns-topic") == "com.example.app.push-type.liveactivity")
        #expect(fixture.observer.sendEvents.map(\.send.snapshotID).compactMap { $0 }.allSatisfy { $0 == "job-1@3" || $0 == "n-1" })
    }

    @Test("a snapshot of the wrong kind is MS008: refused before I/O, reported once with zero attempts")
    func wrongKind() async throws {
        let fixture = try ServiceFixture()
        defer { fixture.keys.remove() }
        await #expect {
            try await fixture.service.send(app: "example", environment: .development, .update(token: activityToken, snapshot: notificationSnapshot))
        } throws: { error in
            let failure = error as! SendFailure
            return failure.errorType == "InvalidSnapshot" && failure.attempts == 0 && failure.trapHits == [.invalidSnapshot]
        }
        #expect(fixture.engine.log.total == 0)
        #expect(fixture.observer.sendEvents.count == 1)
        #expect(fixture.observer.sendEvents.first?.attempts == 0)
        #expect(fixture.observer.sendEvents.first?.outcome == .rejected)
    }

    @Test("unknown apps and environments are refused with a configuration error")
    func unknownApp() async throws {
        let fixture = try ServiceFixture()
        defer { fixture.keys.remove() }
        await #expect { try await fixture.service.send(app: "nope", environment: .development, .listChannels) } throws: {
            ($0 as! SendFailure).errorType == "configuration"
        }
        await #expect { try await fixture.service.send(app: "example", environment: .production, .listChannels) } throws: {
            ($0 as! SendFailure).errorType == "configuration"
        }
    }

    @Test("a Live Activity timestamp that does not increase is refused (or warned, by configuration)")
    func staleTimestamps() async throws {
        let fixture = try ServiceFixture()
        defer { fixture.keys.remove() }
        let service = fixture.service
        _ = try await service.send(app: "example", environment: .development, .update(token: activityToken, snapshot: liveSnapshot, live: .init(timestamp: 1_700_000_500)))
        await #expect {
            try await service.send(app: "example", environment: .development, .update(token: activityToken, snapshot: liveSnapshot, live: .init(timestamp: 1_700_000_500)))
        } throws: { error in
            let apns = (error as! SendFailure).apnsError
            return apns?.code.rawValue == "StaleTimestamp" && apns?.field == "aps.timestamp" && apns?.rule?.contains("1700000500") == true
        }
        #expect(try await service.send(app: "example", environment: .development, .update(token: activityToken, snapshot: liveSnapshot, live: .init(timestamp: 1_700_000_501))).status == 200)
        #expect(fixture.engine.log.total == 2)

        let lenient = try ServiceFixture(timestampPolicy: .warn)
        defer { lenient.keys.remove() }
        for _ in 0..<2 {
            #expect(try await lenient.service.send(app: "example", environment: .development, .update(token: activityToken, snapshot: liveSnapshot, live: .init(timestamp: 1_700_000_900))).status == 200)
        }
    }

    @Test("describe returns the exact request and sends nothing")
    func describe() throws {
        let fixture = try ServiceFixture()
        defer { fixture.keys.remove() }
        let description = try fixture.service.describe(app: "example", environment: .development, .alert(token: deviceToken, snapshot: liveSnapshot))
        #expect(description.path == "/3/device/\(deviceToken)")
        #expect(description.origin.description == "https://api.sandbox.push.apple.com:443")
        #expect(description.payload?["liveSurface"]?["kind"] == "surface_snapshot")
        #expect(fixture.engine.log.total == 0)
        #expect(fixture.observer.sendEvents.isEmpty)
    }
}
