@testable import Ingress
import Relay
import Testing

/// A keyed batch item answered from a stored answer (`replayEntry`, encoded
/// as `batchEntry` is): its bytes pinned as the route rendered them when its
/// JSON object was built and encoded by both callers, whatever the stored
/// body holds.
@Suite("Batch replay entry")
struct ReplayEntryTests {
    static func answer(_ httpStatus: Int, _ body: String) -> IdempotentAnswer {
        IdempotentAnswer(apnsID: nil, status: nil, reason: nil, attempts: 1, httpStatus: httpStatus, headers: [], body: Array(body.utf8))
    }

    /// A stored answer and the entry it renders as item 7.
    static let cases: [(IdempotentAnswer, String)] = [
        (answer(200, #"{"apnsId":"6e1f0a4c-0000-4000-8000-000000000001","status":200,"attempts":1,"latencyMs":0.9,"retried":false,"trapHits":[]}"#),
         #"{"item":7,"ok":true,"apnsId":"6e1f0a4c-0000-4000-8000-000000000001","status":200,"attempts":1,"latencyMs":0.9,"retried":false,"trapHits":[],"idempotentReplay":true}"#),
        (answer(200, #"{ "apnsId" : "x\n\"y\"", "status": 200 }"#),
         #"{"item":7,"ok":true,"apnsId":"x\n\"y\"","status":200,"idempotentReplay":true}"#),
        (answer(200, "[1,2]"), #"{"item":7,"ok":false,"error":[1,2],"idempotentReplay":true}"#),
        (answer(200, "not json"), #"{"item":7,"ok":false,"error":null,"idempotentReplay":true}"#),
        (answer(410, #"{"error":{"type":"apns_rejected","message":"gone \"quoted\"","status":410,"reason":"Unregistered"}}"#),
         #"{"item":7,"ok":false,"error":{"type":"apns_rejected","message":"gone \"quoted\"","status":410,"reason":"Unregistered"},"idempotentReplay":true}"#),
        (answer(400, #"{"message":"an object without an error member"}"#),
         #"{"item":7,"ok":false,"error":{"message":"an object without an error member"},"idempotentReplay":true}"#),
        (answer(503, "overloaded"), #"{"item":7,"ok":false,"error":null,"idempotentReplay":true}"#),
        (answer(503, ""), #"{"item":7,"ok":false,"error":null,"idempotentReplay":true}"#),
    ]

    @Test("the entry's bytes, byte for byte")
    func pinnedBytes() {
        for (answer, expected) in Self.cases {
            let entry = SendAnswers.replayEntry(item: 7, answer)
            #expect(String(decoding: entry, as: UTF8.self) == expected)
        }
    }
}
