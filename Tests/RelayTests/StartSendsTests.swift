import APNs
import MockAPNs
@testable import Relay
import Synchronization
import Testing

/// A durable observer that keeps what it was told, in order, and how many
/// requests APNs had seen when each group of intents arrived.
final class IntentGroupRecorder: DurableSendObserver {
    enum Call: Equatable {
        case intents([APNsID], requestsSeen: Int)
        case intent(APNsID)
        case completion(APNsID)
        case completions([APNsID])
    }

    private let calls = Mutex<[Call]>([])
    private let engine: MockAPNsEngine

    init(engine: MockAPNsEngine) { self.engine = engine }

    var recorded: [Call] { calls.withLock { $0 } }

    func attemptFinished(_ event: AttemptEvent) {}
    func sendFinished(_ event: SendEvent) { calls.withLock { $0.append(.completion(event.send.apnsID)) } }
    func sendStarting(_ send: SendDescriptor, startedAt: UInt64) async -> Bool {
        calls.withLock { $0.append(.intent(send.apnsID)) }
        return true
    }
    func sendsStarting(_ sends: [SendIntent]) async -> Bool {
        let seen = engine.log.total
        calls.withLock { $0.append(.intents(sends.map(\.send.apnsID), requestsSeen: seen)) }
        return true
    }
    func sendFinishedDurably(_ event: SendEvent) async { sendFinished(event) }
    func sendsFinishedDurably(_ events: [SendEvent]) async { calls.withLock { $0.append(.completions(events.map(\.send.apnsID))) } }
    func waitUntilDurable() async {}
}

@Suite("Relay service: sends started together")
struct StartSendsTests {
    /// A service whose durable observer records what it was told.
    static func recordingFixture() throws -> (ServiceFixture, IntentGroupRecorder) {
        var made: IntentGroupRecorder?
        let fixture = try ServiceFixture(moreObservers: { engine in
            made = IntentGroupRecorder(engine: engine)
            return [made!]
        })
        return (fixture, try #require(made))
    }

    @Test("startSends records every intent in one call before any request leaves; a refusal is reported, not started; each started send runs to one completion")
    func intentsTogether() async throws {
        let (fixture, recorder) = try Self.recordingFixture()
        defer { fixture.keys.remove() }
        let service = fixture.service
        let tokens = (0..<5).map { String(repeating: "\($0 + 1)", count: 64) }
        var orders = tokens.map { SendOrder(app: "example", environment: .development, operation: .background(token: $0)) }
        orders.insert(SendOrder(app: "nowhere", environment: .development, operation: .background(token: tokens[0])), at: 2)

        let started = await service.startSends(orders, context: SendContext(caller: "batch"))
        #expect(started.count == 6)
        let runs = started.compactMap { try? $0.get() }
        #expect(runs.count == 5)
        guard case .failure(let refusal) = started[2], case .configuration = refusal.cause else {
            Issue.record("the unknown app was not refused: \(started[2])")
            return
        }
        #expect(refusal.attempts == 0)
        #expect(service.sendsInFlight == 5, "started sends count as in flight until they have run")
        // One group of five intents, none of them sent yet; the refusal's row (a completion) beside it.
        #expect(recorder.recorded.contains(.intents(runs.map(\.apnsID), requestsSeen: 0)), "\(recorder.recorded)")
        #expect(!recorder.recorded.contains { if case .intent = $0 { true } else { false } }, "no intent recorded one by one")

        for run in runs {
            let result = try await service.run(run)
            #expect(result.status == 200)
            #expect(result.apnsID == run.apnsID)
        }
        #expect(fixture.engine.log.total == 5)
        #expect(service.sendsInFlight == 0)
        let completions = recorder.recorded.compactMap { if case .completion(let id) = $0 { id } else { nil } }
        #expect(Set(completions) == Set(runs.map(\.apnsID) + [refusal.apnsID]), "one completion per send, the refusal's included")
        #expect(completions.count == 6)
        #expect(!recorder.recorded.contains { if case .intent = $0 { true } else { false } }, "a started send does not record its intent again when it runs")
    }

    @Test("sends run with one SendCompletions: metrics hear each as it ends; the durable record is one group, made by recordCompletions; in flight until then")
    func completionsTogether() async throws {
        let (fixture, recorder) = try Self.recordingFixture()
        defer { fixture.keys.remove() }
        let service = fixture.service
        let orders = (0..<4).map { SendOrder(app: "example", environment: .development, operation: .background(token: String(repeating: "\($0 + 1)", count: 64))) }
        let runs = await service.startSends(orders, context: SendContext(caller: "batch")).compactMap { try? $0.get() }
        #expect(runs.count == 4)

        let completions = SendCompletions(capacity: runs.count)
        for run in runs {
            let result = try await service.run(run, completingWith: completions)
            #expect(result.status == 200)
        }
        #expect(fixture.engine.log.total == 4)
        // The plain observer (metrics) had each at once; the durable one nothing yet.
        #expect(fixture.observer.sendEvents.map(\.send.apnsID) == runs.map(\.apnsID))
        #expect(!recorder.recorded.contains { if case .completion = $0 { true } else if case .completions = $0 { true } else { false } }, "\(recorder.recorded)")
        #expect(service.sendsInFlight == 4, "ran but not recorded: still in flight, so a drain waits for the records")

        await service.recordCompletions(completions)
        #expect(recorder.recorded.last == .completions(runs.map(\.apnsID)), "one group of four completions: \(recorder.recorded)")
        #expect(service.sendsInFlight == 0)
        #expect(fixture.observer.sendEvents.count == 4, "the plain observers are not told twice")
        // Recorded once: a second call has nothing left.
        await service.recordCompletions(completions)
        #expect(recorder.recorded.count { if case .completions = $0 { true } else { false } } == 1)
    }

    @Test("a run of alerts of one snapshot is projected and encoded once; the requests are those a single send builds; a snapshot of the wrong kind is refused as send refuses it")
    func payloadOnce() async throws {
        let memo = PayloadMemo()
        let first = try #require(memo.payload(.alert, of: liveSnapshot))
        let again = try #require(memo.payload(.alert, of: liveSnapshot))
        let expected = try liveSnapshot.alertPayload()
        #expect(first.payload == expected && again.payload == expected)
        let builder = try RequestBuilder(bundleID: "com.example.app", now: { 1_700_000_000 }, makeID: { APNsID("0f9e8d7c-6b5a-4c3d-8e1f-a0b1c2d3e4f5")! })
        #expect(try builder.alert(token: deviceToken, payload: again) == builder.alert(token: deviceToken, payload: expected))
        #expect(memo.payload(.alert, of: notificationSnapshot) == nil, "a notification snapshot has no alert payload: the ordinary path refuses it")
        #expect(try memo.payload(.notification, of: notificationSnapshot)?.payload == notificationSnapshot.notificationPayload())

        let fixture = try ServiceFixture()
        defer { fixture.keys.remove() }
        let service = fixture.service
        var orders = (0..<3).map { SendOrder(app: "example", environment: .development, operation: .alert(token: String(repeating: "\($0 + 1)", count: 64), snapshot: liveSnapshot)) }
        orders.append(SendOrder(app: "example", environment: .development, operation: .alert(token: deviceToken, snapshot: notificationSnapshot)))
        let started = await service.startSends(orders, context: SendContext(caller: "batch"))
        var single: SendFailure?
        do { _ = try await service.send(app: "example", environment: .development, .alert(token: deviceToken, snapshot: notificationSnapshot)) } catch { single = error }
        guard case .failure(let refusal) = started[3], case .invalidSnapshot(let batchError) = refusal.cause,
              case .invalidSnapshot(let singleError)? = single?.cause else {
            Issue.record("the wrong kind of snapshot was not refused as InvalidSnapshot: \(started[3]), \(String(describing: single))")
            return
        }
        #expect("\(batchError)" == "\(singleError)")
        for case .success(let run) in started { #expect(try await service.run(run).status == 200) }
        #expect(fixture.engine.log.total == 3)
    }
}
