import APNs
@testable import Ingress
import RelayJSON
@testable import Relay
import Testing

/// A batch's result entry, written straight into its bytes: the same bytes
/// as the JSON object the route built per send before (below, kept as the
/// reference), for successes and failures, with and without a `tokenIndex`.
@Suite("Batch result entry")
struct BatchEntryTests {
    /// The entry as it was rendered before: a JSON object, then encoded.
    static func reference(item: Int, tokenIndex: Int?, result: Result<SendResult, IngressError>) -> [UInt8] {
        var members: [(String, JSONValue)] = [("item", .integer(Int64(item)))]
        if let tokenIndex { members.append(("tokenIndex", .integer(Int64(tokenIndex)))) }
        switch result {
        case .success(let result):
            members.append(("ok", .bool(true)))
            members += SendAnswers.successBody(result).members.map { ($0.key, $0.value) }
        case .failure(let error):
            members.append(("ok", .bool(false)))
            members.append(("error", error.object))
        }
        return JSONValue.object(JSONObject(members)).encoded()
    }

    static let failures: [IngressError] = {
        var notSent = IngressError(status: 503, type: .notSent, message: "not sent: the batch deadline passed")
        notSent.reason = "BatchDeadline"
        var rejected = IngressError(status: 410, type: .apnsRejected, message: "the device token is no longer active \"quoted\"\n", field: "token")
        rejected.apnsStatus = 410
        rejected.trapID = .invalidSnapshot
        rejected.fix = "stop sending to it"
        rejected.apnsID = SendAnswerTests.apnsID
        rejected.attempts = 2
        rejected.trapHits = [.invalidSnapshot, .tooManyRequests]
        return [notSent, rejected, .invalid("items[3].token", "must be 64 hex digits")]
    }()

    static let results: [Result<SendResult, IngressError>] = SendAnswerTests.results.map { .success($0) } + failures.map { .failure($0) }

    @Test("the same bytes as the encoded entry object", arguments: results, [(0, nil), (7, 0), (12_345, 999)] as [(Int, Int?)])
    func sameBytes(_ result: Result<SendResult, IngressError>, _ position: (item: Int, tokenIndex: Int?)) {
        let entry = SendAnswers.batchEntry(item: position.item, tokenIndex: position.tokenIndex, result: result)
        let expected = Self.reference(item: position.item, tokenIndex: position.tokenIndex, result: result)
        #expect(String(decoding: entry, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
    }
}
