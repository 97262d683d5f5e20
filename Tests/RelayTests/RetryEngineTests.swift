import APNs
import MockAPNs
import Relay
import TestSupport
import Testing

@Suite("Retry engine against the mock APNs engine")
struct RetryEngineTests {
    @Test("first-try success: one attempt, one final attempt event, one send event")
    func success() async throws {
        let fixture = try PipelineFixture()
        let request = try fixture.update()
        let result = try await fixture.client.send(request)
        #expect(result.status == 200)
        #expect(result.attempts == 1)
        #expect(!result.retried)
        #expect(result.apnsID == request.apnsID)
        #expect(result.apnsUniqueID != nil)
        #expect(fixture.observer.attemptEvents.map(\.isFinalAttempt) == [true])
        let event = try #require(fixture.observer.sendEvents.first)
        #expect(fixture.observer.sendEvents.count == 1)
        #expect(event.outcome == .success)
        #expect(event.send.operation == .update)
        #expect(event.send.tokenFingerprint == request.tokenFingerprint)
        #expect(event.send.traceID?.count == 32)
    }

    @Test("503, 503, then 200: three attempts with one apns-id and bounded backoff")
    func retriesThenSucceeds() async throws {
        let fixture = try PipelineFixture(rules: [MockRule(.any, [.reject(reason: "ServiceUnavailable"), .reject(reason: "ServiceUnavailable"), .succeed])])
        let request = try fixture.update()
        let result = try await fixture.client.send(request)
        #expect(result.attempts == 3)
        #expect(result.retried)
        #expect(fixture.engine.log.attempts(apnsID: request.apnsID.value).map(\.status) == [503, 503, 200])
        let waits = fixture.sleeps.recorded
        #expect(waits.count == 2)
        #expect(waits[0] >= 0.1 && waits[0] <= 0.2)
        #expect(waits[1] >= 0.2 && waits[1] <= 0.3)
        #expect(fixture.observer.attemptEvents.map(\.isFinalAttempt) == [false, false, true])
        #expect(fixture.observer.attemptEvents.map(\.status) == [503, 503, 200])
    }

    @Test("persistent 503 at priority 5: 1 + 3 attempts, then the typed failure")
    func exhaustsBudget() async throws {
        let fixture = try PipelineFixture(rules: [MockRule(.any, always: .reject(reason: "ServiceUnavailable"))])
        await #expect {
            try await fixture.client.send(try fixture.update())
        } throws: { error in
            let failure = error as! SendFailure
            return failure.attempts == 4 && failure.errorType == "ServiceUnavailable" && failure.apnsError?.status == 503
        }
        #expect(fixture.sleeps.recorded.count == 3)
        #expect(fixture.observer.sendEvents.map(\.outcome) == [.rejected])
    }

    @Test("priority 10 gets at most 2 retries with doubled delays")
    func priorityStretch() async throws {
        let fixture = try PipelineFixture(rules: [MockRule(.any, always: .reject(reason: "InternalServerError"))])
        await #expect(throws: SendFailure.self) { try await fixture.client.send(try fixture.alert(priority: .immediate)) }
        let waits = fixture.sleeps.recorded
        #expect(waits.count == 2)
        #expect(waits[0] >= 0.2 && waits[0] <= 0.4)
        #expect(waits[1] >= 0.4 && waits[1] <= 0.6)
    }

    @Test("kill switch by environment: zero retries for every send")
    func killSwitchEnvironment() async throws {
        let fixture = try PipelineFixture(
            rules: [MockRule(.any, always: .reject(reason: "ServiceUnavailable"))],
            killSwitch: KillSwitch(environment: { $0 == "APNS_RELAY_DISABLE_RETRY" ? "1" : nil }))
        await #expect(throws: SendFailure.self) { try await fixture.client.send(try fixture.update()) }
        #expect(fixture.engine.log.total == 1)
        #expect(fixture.sleeps.recorded.isEmpty)
    }

    @Test("kill switch at runtime: engaged → one attempt; released → full budget again")
    func killSwitchRuntime() async throws {
        let fixture = try PipelineFixture(rules: [MockRule(.any, always: .reject(reason: "ServiceUnavailable"))])
        fixture.killSwitch.setRuntime(engaged: true)
        await #expect(throws: SendFailure.self) { try await fixture.client.send(try fixture.update()) }
        #expect(fixture.engine.log.total == 1)
        fixture.killSwitch.setRuntime(engaged: false)
        await #expect(throws: SendFailure.self) { try await fixture.client.send(try fixture.update()) }
        #expect(fixture.engine.log.total == 1 + 4)
    }

    @Test("429 with Retry-After waits at least that long and records MS015")
    func retryAfter() async throws {
        let fixture = try PipelineFixture(rules: [MockRule(.any, [.tooManyRequests(retryAfterSeconds: 7), .succeed])])
        let result = try await fixture.client.send(try fixture.update())
        #expect(result.attempts == 2)
        #expect(fixture.sleeps.recorded == [7])
        #expect(result.trapHits == [.tooManyRequests])
    }

    @Test("410 Unregistered: no retry, token marked dead with APNs' timestamp")
    func unregistered() async throws {
        let fixture = try PipelineFixture(rules: [MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1_699_999_000_000))])
        await #expect(throws: SendFailure.self) {
            try await fixture.client.send(try fixture.update(token: "dead" + String(repeating: "0", count: 60)))
        }
        let event = try #require(fixture.observer.sendEvents.first)
        #expect(event.attempts == 1)
        #expect(event.outcome == .rejected)
        #expect(event.dropsToken)
        #expect(event.unregisteredAt == 1_699_999_000_000)
        #expect(event.trapHits == [.deadToken])
    }

    @Test("ExpiredProviderToken: the JWT is invalidated and the send retried once")
    func expiredProviderToken() async throws {
        let fixture = try PipelineFixture(expiredFirst: true)
        let result = try await fixture.client.send(try fixture.update())
        #expect(result.attempts == 2)
        #expect(fixture.authorization.invalidationCount == 1)
        #expect(fixture.engine.log.entries.map(\.reason) == ["ExpiredProviderToken", nil])
        #expect(fixture.sleeps.recorded.isEmpty)
    }

    @Test("timeouts and resets are retried as transport errors")
    func transportErrors() async throws {
        let fixture = try PipelineFixture(rules: [MockRule(.any, [.noAnswer, .resetConnection, .succeed])]) {
            $0.requestTimeout = 0.05
            // Not what is tested: a starved test task may resume from the 0.05 s
            // timeout half a minute late, past the default 30 s send deadline.
            $0.sendDeadline = 3600
        }
        let result = try await fixture.client.send(try fixture.update())
        #expect(result.attempts == 3)
        #expect(fixture.observer.attemptEvents.map(\.errorType) == ["transport_timeout", "transport_connection", nil])
    }

    // "GOAWAY-unprocessed resends cost no retry budget" moved to
    // GoAwayResendTests: the HTTP/2 pool owns those resends, so it runs over the real pool.

    @Test("unprocessed from the transport (its pool's resends spent) ends the send: one attempt, whatever the budget")
    func unprocessedIsFinal() async throws {
        let fixture = try PipelineFixture(rules: [MockRule(.any, [.goAway(graceful: false), .succeed])])
        let failure = try #require(await transportFailure(of: fixture.client, try fixture.update()))
        #expect(failure.error.kind == .unprocessed)
        #expect(failure.attempts == 1)
        #expect(fixture.engine.log.total == 1)
        #expect(fixture.sleeps.recorded.isEmpty)
        #expect(fixture.observer.sendEvents.map(\.errorType) == ["transport_unprocessed"])
    }

    @Test("cancellation wakes a backoff sleep at once")
    func cancellation() async throws {
        let attempted = AsyncStream<Void>.makeStream()
        let observer = RecordingObserver { _ in attempted.continuation.yield() }
        let fixture = try PipelineFixture(
            rules: [MockRule(.any, always: .tooManyRequests(retryAfterSeconds: 20))], realSleep: true, observer: observer)
        let request = try fixture.update()
        let task = Task { try await fixture.client.send(request) }
        var iterator = attempted.stream.makeAsyncIterator()
        _ = await iterator.next()  // the first attempt is done; the send now sleeps 20 s
        task.cancel()
        let outcome = await task.result
        // The 20 s backoff ended because the cancellation woke it, not because
        // it ran out: told by how the sleep ended, not by a clock.
        #expect(fixture.cutSleeps.recorded.count == 1, "backoff sleeps woken early: \(fixture.cutSleeps.recorded)")
        #expect(fixture.engine.log.total == 1, "no second attempt after the cancellation")
        guard case .failure(let failure as SendFailure) = outcome, case .cancelled = failure.cause else {
            Issue.record("expected a cancelled SendFailure, got \(outcome)")
            return
        }
        #expect(fixture.observer.sendEvents.map(\.outcome) == [.cancelled])
    }

    @Test("10,000 mixed sends: every send ends in exactly one result and one send event")
    func mixedRun() async throws {
        let fixture = try PipelineFixture(rules: [
            MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1_699_999_000_000)),
            MockRule(.tokenPrefix("f1a7"), [.reject(reason: "ServiceUnavailable"), .succeed]),
            MockRule(.tokenPrefix("7007"), [.tooManyRequests(retryAfterSeconds: 1), .succeed]),
            MockRule(.tokenPrefix("bad0"), always: .reject(reason: "BadDeviceToken")),
        ])
        let prefixes = ["dead", "f1a7", "7007", "bad0", "0000", "1111", "2222", "3333"]
        let requests = try (0..<10_000).map { index in
            try fixture.update(token: prefixes[index % prefixes.count] + String(format: "%060d", index))
        }
        let outcomes = await withTaskGroup(of: Bool.self) { group in
            for request in requests {
                group.addTask {
                    do { _ = try await fixture.client.send(request); return true } catch { return false }
                }
            }
            var collected: [Bool] = []
            for await outcome in group { collected.append(outcome) }
            return collected
        }
        #expect(outcomes.count == 10_000)
        #expect(outcomes.filter { $0 }.count == 7_500)
        let sends = fixture.observer.sendEvents
        #expect(sends.count == 10_000)
        #expect(Set(sends.map(\.send.apnsID)).count == 10_000)
        #expect(sends.filter { $0.outcome == .success }.count == 7_500)
        #expect(sends.reduce(0) { $0 + $1.attempts } == fixture.observer.attemptEvents.count)
        #expect(fixture.engine.log.total == fixture.observer.attemptEvents.count)
        #expect(fixture.observer.attemptEvents.count == 10_000 + 2_500)
        #expect(sends.filter(\.dropsToken).count == 2_500)
    }
}

@Suite("Send deadline")
struct DeadlineTests {
    @Test("a wait that would pass the send deadline ends the send instead")
    func deadline() async throws {
        let fixture = try PipelineFixture(rules: [MockRule(.any, always: .tooManyRequests(retryAfterSeconds: 600))])
        await #expect(throws: SendFailure.self) { try await fixture.client.send(try fixture.update()) }
        #expect(fixture.engine.log.total == 1)
        #expect(fixture.sleeps.recorded.isEmpty)
        #expect(fixture.observer.attemptEvents.map(\.isFinalAttempt) == [true])
    }
}
