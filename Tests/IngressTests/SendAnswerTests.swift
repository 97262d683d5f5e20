import APNs
@testable import Ingress
import RelayJSON
@testable import Relay
import Testing

/// The answer to a single send, written straight into its bytes: the same
/// bytes as encoding ``SendAnswers/successBody(_:)``, which the channel
/// routes still build as an object.
@Suite("Send answer")
struct SendAnswerTests {
    static let apnsID = APNsID("7D3E5C2A-0F4B-4C8D-9E1A-2B3C4D5E6F70")!

    static let results: [SendResult] = [
        SendResult(apnsID: apnsID, status: 200, timestamp: 1, attempts: 1, latencyMilliseconds: 12.3456789, trapHits: [], apnsUniqueID: nil, channelID: nil, body: []),
        SendResult(apnsID: apnsID, status: 200, timestamp: 1, attempts: 3, latencyMilliseconds: 2000, trapHits: [.invalidSnapshot, .tooManyRequests],
                   apnsUniqueID: "a8f3b2c1-0000-4000-8000-00000000000a", channelID: nil, body: []),
        SendResult(apnsID: apnsID, status: 201, timestamp: 1, attempts: 2, latencyMilliseconds: 0.0004, trapHits: [.tooManyRequests],
                   apnsUniqueID: "with \"quotes\" and \\ \n", channelID: "c", body: [1]),
    ]

    @Test("the same bytes as the encoded success object, and the apns-id header", arguments: results)
    func sameBytes(_ result: SendResult) {
        let response = SendAnswers.successResponse(result)
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == JSONValue.object(SendAnswers.successBody(result)).encodedString())
        #expect(response.headers.map(\.name) == ["content-type", "apns-id"])
        #expect(response.headers.first { $0.name == "apns-id" }?.value == Self.apnsID.description)
    }
}
