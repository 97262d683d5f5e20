import APNs
import MockAPNs
import Relay
import Testing

/// How a send that runs out of time ends, against a send that runs out of retries.
@Suite("Deadline outcome")
struct DeadlineOutcomeTests {
    @Test("no answer until the deadline: the send ends as deadline_exceeded, outcome failed")
    func noAnswer() async throws {
        let fixture = try PipelineFixture(rules: [MockRule(.any, always: .noAnswer)]) { configuration in
            configuration.requestTimeout = 0.05
            configuration.sendDeadline = 0.12
        }
        let request = try fixture.alert()
        do throws(SendFailure) {
            _ = try await fixture.client.send(request)
            Issue.record("the send succeeded")
        } catch {
            guard case .deadlineExceeded = error.cause else { Issue.record("cause \(error.cause)"); return }
            #expect(error.errorType == "deadline_exceeded")
        }
        let event = try #require(fixture.observer.sendEvents.first)
        #expect(event.outcome == .failed && event.errorType == "deadline_exceeded")
        #expect(fixture.observer.sendEvents.count == 1)
    }

    @Test("a connection failure on every attempt, well inside the deadline, stays a transport failure")
    func transportFailure() async throws {
        let fixture = try PipelineFixture(rules: [MockRule(.any, always: .resetConnection)])
        let request = try fixture.alert()
        do throws(SendFailure) {
            _ = try await fixture.client.send(request)
            Issue.record("the send succeeded")
        } catch {
            guard case .transport(let transport) = error.cause else { Issue.record("cause \(error.cause)"); return }
            #expect(transport.kind == .connection)
            #expect(error.attempts == 3)
        }
        #expect(fixture.observer.sendEvents.first?.errorType == "transport_connection")
    }

    @Test("with the kill switch engaged, a 503's fix says it was not retried")
    func fixWithRetriesDisabled() async throws {
        let fixture = try PipelineFixture(
            rules: [MockRule(.any, always: .reject(reason: "ServiceUnavailable", status: 503))],
            killSwitch: KillSwitch(environment: { $0 == "APNS_RELAY_DISABLE_RETRY" ? "1" : nil }))
        let request = try fixture.alert()
        do throws(SendFailure) {
            _ = try await fixture.client.send(request)
            Issue.record("the send succeeded")
        } catch {
            let fix = try #require(error.apnsError?.fix)
            #expect(error.attempts == 1)
            #expect(fix.hasPrefix("Not retried: retries are disabled (kill switch)."), "\(fix)")
            #expect(!fix.localizedLowercase.contains("retried with backoff"), "\(fix)")
        }
    }
}
