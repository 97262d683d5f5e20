import APNs
@testable import Ingress
import Relay
import RelayJSON
import Testing

/// A keyed send's repeat answered from its audit row (``IdempotencyKeys/recoveredAnswer(_:render:)``):
/// on the HTTP/2 APNs ingress in APNs' shape, whatever the row says; on
/// the HTTP/1.1 routes in `/v1/send`'s, as before.
@Suite("Recovered idempotency answers")
struct APNsRecoveredAnswerTests {
    static let apnsID = "8a2f3c4d-1e2f-4a5b-9c6d-7e8f9a0b1c2d"

    static func sent(_ outcome: String, status: Int?, reason: String?, unique: String? = nil) -> IdempotencyRecoveredSend {
        IdempotencyRecoveredSend(
            owner: "claim", apnsID: apnsID, outcome: outcome, status: status, reason: reason, errorType: nil, attempts: 1,
            latencyMilliseconds: 3, retried: false, trapIDs: [], apnsUniqueID: unique)
    }

    static func apns(_ sent: IdempotencyRecoveredSend) -> IdempotentAnswer {
        IdempotencyKeys.recoveredAnswer(sent, render: { APNsAnswers.compatibleResponse($0, .apns) })
    }

    static func reason(_ answer: IdempotentAnswer) -> String? { (try? JSONParser.parse(answer.body))?["reason"]?.stringValue }
    static func header(_ answer: IdempotentAnswer, _ name: String) -> String? { answer.headers.first { $0.name == name }?.value }

    @Test("success: 200, the apns-id and apns-unique-id, no body")
    func success() {
        let answer = Self.apns(Self.sent("success", status: 200, reason: nil, unique: "u-1"))
        #expect(answer.httpStatus == 200 && answer.body.isEmpty)
        #expect(Self.header(answer, "apns-id") == Self.apnsID && Self.header(answer, "apns-unique-id") == "u-1")
    }

    @Test("APNs' refusal: its status and reason, the apns-id")
    func rejected() {
        let answer = Self.apns(Self.sent("rejected", status: 400, reason: "BadDeviceToken"))
        #expect(answer.httpStatus == 400 && Self.reason(answer) == "BadDeviceToken" && Self.header(answer, "apns-id") == Self.apnsID)
    }

    @Test("an unknown outcome is 500 SendOutcomeUnknown (not the relay's 502); APNs' own 5xx answer when it gave one")
    func unknown() {
        let unknown = Self.apns(Self.sent("unknown", status: nil, reason: nil))
        #expect(unknown.httpStatus == 500 && Self.reason(unknown) == "SendOutcomeUnknown" && Self.header(unknown, "apns-id") == Self.apnsID)
        let failed = Self.apns(Self.sent("failed", status: 503, reason: "ServiceUnavailable"))
        #expect(failed.httpStatus == 503 && Self.reason(failed) == "ServiceUnavailable")
        // /v1/send's shape on the HTTP/1.1 routes, unchanged.
        let relay = IdempotencyKeys.recoveredAnswer(Self.sent("unknown", status: nil, reason: nil))
        #expect(relay.httpStatus == 502 && (try? JSONParser.parse(relay.body))?["error"]?["type"]?.stringValue == "Upstream")
    }
}
