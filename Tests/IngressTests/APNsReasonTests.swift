import HTTPServer
@testable import Ingress
import RelayJSON
import Testing

/// The HTTP/2 APNs ingress answers the relay's own refusals in APNs' words:
/// an APNs client library acts on those reasons and knows no other.
@Suite("APNs reasons for the relay's refusals")
struct APNsReasonTests {
    static func answer(_ error: IngressError) throws -> (status: Int, reason: String?) {
        let response = APNsAnswers.compatibleResponse(.failure(error), .apns)
        return (response.status, try JSONParser.parse(response.body)["reason"]?.stringValue)
    }

    @Test("draining, overload and an unreachable APNs are 503 ServiceUnavailable; rate limit 429 TooManyRequests; too large 413 PayloadTooLarge")
    func refusals() throws {
        #expect(try Self.answer(IngressError(status: 503, type: .draining, message: "draining")) == (503, "ServiceUnavailable"))
        #expect(try Self.answer(IngressError(status: 503, type: .overloaded, message: "busy")) == (503, "ServiceUnavailable"))
        #expect(try Self.answer(IngressError(status: 502, type: .upstream, message: "unreachable")) == (502, "ServiceUnavailable"))
        #expect(try Self.answer(IngressError(status: 429, type: .rateLimited, message: "slow down")) == (429, "TooManyRequests"))
        #expect(try Self.answer(IngressError(status: 413, type: .payloadTooLarge, message: "big")) == (413, "PayloadTooLarge"))
        #expect(try Self.answer(IngressError(status: 403, type: .forbidden, message: "not yours", field: "app")) == (403, "TopicDisallowed"))
    }

    @Test("APNs' own reason passes unchanged; the HTTP/1.1 route keeps the relay's type where APNs gave none")
    func apnsReasonsPass() throws {
        var unregistered = IngressError(status: 410, type: .apnsRejected, message: "gone")
        unregistered.reason = "Unregistered"
        #expect(try Self.answer(unregistered) == (410, "Unregistered"))
        let relay = APNsAnswers.compatibleResponse(.failure(IngressError(status: 503, type: .draining, message: "draining")), .relay)
        #expect(try JSONParser.parse(relay.body)["reason"]?.stringValue == "Draining")
    }
}
