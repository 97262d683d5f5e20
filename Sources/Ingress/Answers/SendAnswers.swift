import APNs
import HTTPServer
import Relay
import RelayJSON
import RelayBasics

/// The relay's own answers to sends, written once for every route: the
/// success body (`/v1/send`, channels, batch entries), a failed send's
/// error, a replayed idempotent answer, a batch's result entries.
enum SendAnswers {
    /// The answer to a send that failed, `draining` or not.
    static func answer(to error: SendFailure, draining: Bool) -> IngressError {
        // The drain closes the APNs connections near its end: a send cut
        // off there is the shutdown's doing, not APNs', and may have arrived.
        if draining, case .transport(let transport) = error.cause, transport.kind == .closed || transport.kind == .connection {
            var answer = IngressError(
                status: 503, type: .draining,
                message: "the relay shut down before APNs answered this send; it may have been delivered (its apnsId finds it in the audit log)")
            answer.retryAfter = 1
            answer.apnsID = error.apnsID
            answer.attempts = error.attempts
            return answer
        }
        return IngressError(error)
    }

    /// `{apnsId, status, attempts, latencyMs, retried, trapHits, apnsUniqueId?}`.
    static func successBody(_ result: SendResult) -> JSONObject {
        var members: [(String, JSONValue)] = []
        members.reserveCapacity(7)
        forEachSuccessMember(result, apnsID: result.apnsID.description) { members.append(($0, $1)) }
        return JSONObject(members)
    }

    /// The success answer's members, in order: the one list of its fields,
    /// which ``successBody(_:)`` collects into an object and
    /// ``appendSuccessMembers(_:apnsID:to:)`` writes straight into bytes.
    @inline(__always)
    static func forEachSuccessMember(_ result: SendResult, apnsID: String, _ member: (String, JSONValue) -> Void) {
        member("apnsId", .string(apnsID))
        member("status", .integer(Int64(result.status)))
        member("attempts", .integer(Int64(result.attempts)))
        member("latencyMs", .double((result.latencyMilliseconds * 1000).rounded() / 1000))
        member("retried", .bool(result.retried))
        member("trapHits", .array(result.trapHits.map { .string($0.rawValue) }))
        if let unique = result.apnsUniqueID { member("apnsUniqueId", .string(unique)) }
    }

    /// 200 with ``successBody(_:)`` and the `apns-id` header, for every
    /// single send: the body written straight into its bytes (the same
    /// bytes as encoding ``successBody(_:)``, without building the object
    /// first) and the apns-id spelled once for body and header.
    static func successResponse(_ result: SendResult) -> HTTPResponse {
        let apnsID = result.apnsID.description
        var body: [UInt8] = []
        body.reserveCapacity(160 + (result.apnsUniqueID?.utf8.count ?? 0))
        body.append(UInt8(ascii: "{"))
        appendSuccessMembers(result, apnsID: apnsID, to: &body)
        body.append(UInt8(ascii: "}"))
        return .json(200, body, headers: [HTTPHeader("apns-id", apnsID)])
    }

    /// ``successBody(_:)``'s members as JSON, comma-separated, without the
    /// braces: written straight into `body` (a single send's answer, a
    /// batch's result entry) without building the object. The names are
    /// plain ASCII, so they go in unescaped.
    static func appendSuccessMembers(_ result: SendResult, apnsID: String, to body: inout [UInt8]) {
        var first = true
        forEachSuccessMember(result, apnsID: apnsID) { name, value in
            if !first { body.append(UInt8(ascii: ",")) }
            first = false
            body.append(UInt8(ascii: "\""))
            body.append(contentsOf: name.utf8)
            body.append(contentsOf: #"":"#.utf8)
            value.encode(into: &body)
        }
    }

    /// The first answer again, marked as a replay.
    static func replayResponse(_ answer: IdempotentAnswer) -> HTTPResponse {
        HTTPResponse(
            status: answer.httpStatus, headers: answer.headers.map { HTTPHeader($0.name, $0.value) } + [HTTPHeader(IdempotencyKeys.replayedHeader, "true")],
            body: answer.body)
    }

    /// `/v1/send`'s answer to a result (also what a keyed batch item keeps, so
    /// either route can replay the other's send).
    static func sendResponse(_ result: Result<SendResult, IngressError>) -> HTTPResponse {
        switch result {
        case .success(let result):
            successResponse(result)
        case .failure(let error):
            error.response
        }
    }

    /// A batch item answered from a stored `/v1/send` answer, encoded as
    /// ``batchEntry(item:tokenIndex:result:)`` returns its entries: its
    /// members, `ok`, and `idempotentReplay: true`.
    static func replayEntry(item: Int, _ answer: IdempotentAnswer) -> [UInt8] {
        var members: [(String, JSONValue)] = [("item", .integer(Int64(item)))]
        let body = try? JSONParser.parse(answer.body)
        if answer.httpStatus == 200, let object = body?.objectValue {
            members.append(("ok", .bool(true)))
            members += object.members.map { ($0.key, $0.value) }
        } else {
            members.append(("ok", .bool(false)))
            members.append(("error", body?["error"] ?? body ?? .null))
        }
        members.append(("idempotentReplay", .bool(true)))
        return JSONValue.object(JSONObject(members)).encoded()
    }

    /// A send's entry in a batch's `results`, encoded:
    /// `{item, tokenIndex?, ok: true, …successBody}` or `{item, tokenIndex?,
    /// ok: false, error}`. A success is written straight into its bytes
    /// (``appendSuccessMembers(_:apnsID:to:)``), without building a JSON
    /// object per send; `BatchEntryTests` pins the bytes to that object's encoding.
    static func batchEntry(item: Int, tokenIndex: Int?, result: Result<SendResult, IngressError>) -> [UInt8] {
        var entry: [UInt8] = []
        entry.reserveCapacity(200)
        entry.append(contentsOf: #"{"item":"#.utf8)
        JSONValue.integer(Int64(item)).encode(into: &entry)
        if let tokenIndex {
            entry.append(contentsOf: #","tokenIndex":"#.utf8)
            JSONValue.integer(Int64(tokenIndex)).encode(into: &entry)
        }
        switch result {
        case .success(let result):
            entry.append(contentsOf: #","ok":true,"#.utf8)
            appendSuccessMembers(result, apnsID: result.apnsID.description, to: &entry)
        case .failure(let error):
            entry.append(contentsOf: #","ok":false,"error":"#.utf8)
            error.object.encode(into: &entry)
        }
        entry.append(UInt8(ascii: "}"))
        return entry
    }
}
