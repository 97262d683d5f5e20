import APNs
import HTTPServer
import Relay
import RelayJSON
import RelayBasics

/// Idempotent sends (docs/api.md, "Idempotency keys"): a send with an
/// `Idempotency-Key` (a batch item's `idempotencyKey`) is sent once per
/// caller and key within `ingress.idempotency_window_seconds`; a repeat gets
/// the first answer back, marked `Idempotency-Replayed: true`, and sends
/// nothing. The keys live in the ``IdempotencyStore`` every relay of the
/// deployment shares. Sends without a key never come here.
extension Ingress {
    /// The request header that carries a key (`/v1/send`, `/3/device/{token}`).
    static let idempotencyHeader = "Idempotency-Key"
    /// The answer header that marks a replay.
    static let replayedHeader = "Idempotency-Replayed"

    /// Checks a key: 1 to 255 printable ASCII characters (0x20-0x7E).
    static func checkIdempotencyKey(_ key: String, field: String) throws(IngressError) {
        try checkIdempotencyKey(bytes: key.utf8, field: field)
    }

    /// Checks a key's bytes as the caller sent them: a header value that is
    /// not UTF-8 is checked raw, so the error names the byte sent (0xe9 of
    /// Latin-1 `é`), not a byte of the U+FFFD it would read as.
    static func checkIdempotencyKey<Bytes: Collection<UInt8>>(bytes: Bytes, field: String) throws(IngressError) {
        guard !bytes.isEmpty, bytes.count <= 255 else {
            throw .invalid(field, "must be 1 to 255 printable ASCII characters (this one has \(bytes.count) bytes)")
        }
        if let index = bytes.firstIndex(where: { $0 < 0x20 || $0 > 0x7E }) {
            let byte = bytes[index]
            throw .invalid(field, "must be printable ASCII (0x20-0x7E): found byte 0x\(byte < 16 ? "0" : "")\(String(byte, radix: 16)) at byte \(bytes.distance(from: bytes.startIndex, to: index))")
        }
    }

    /// The request's `Idempotency-Key`, checked; nil without one.
    static func headerIdempotencyKey(_ request: HTTPRequest) throws(IngressError) -> String? {
        // Header names are lowercase already (HTTPHeader): compared as they are, counted without an array.
        var first: HTTPHeader?
        var count = 0
        for header in request.headers where header.name == "idempotency-key" {
            count += 1
            if first == nil { first = header }
        }
        guard let first else { return nil }
        guard count == 1 else { throw .invalid(idempotencyHeader, "give one key per request, not \(count)") }
        if let raw = request.undecodedHeaderValues[first.name] {
            try checkIdempotencyKey(bytes: raw, field: idempotencyHeader)
        }
        try checkIdempotencyKey(first.value, field: idempotencyHeader)
        return first.value
    }

    /// The claim of `key` from the call's caller on the request `canonical` describes.
    static func keyedSend(_ key: String, field: String, app: String, call: Call, canonical: [UInt8]) -> KeyedSend {
        let caller = call.key.name
        let claim = IdempotencyClaim(
            caller: caller, keyHash: Fingerprint.sha256Hex(Array("\(caller)\n\(key)".utf8)), requestHash: Fingerprint.sha256Hex(canonical),
            token: APNsID.random().value)
        return KeyedSend(claim: claim, app: app, key: key, field: field)
    }

    /// The answer of a send recovered from its audit row, in the route's
    /// shape (`render`): the success answer, or for any other outcome an
    /// error naming the first send's apns-id, outcome and reason (see
    /// ``recoveredResult(_:)``).
    static func recoveredAnswer(
        _ sent: IdempotencyRecoveredSend, render: (Result<SendResult, IngressError>) -> HTTPResponse = Ingress.sendResponse
    ) -> IdempotentAnswer {
        IdempotencyGate.answer(render(recoveredResult(sent)), apnsID: sent.apnsID, status: sent.status, reason: sent.reason, attempts: sent.attempts)
    }

    /// What a send recovered from its audit row came to: its success, APNs'
    /// 4xx refusal, or a 502 `upstream` error for any other outcome. Never
    /// a cue to send again: a send that ended `unknown` (the relay stopped
    /// mid-send) may have reached the device.
    static func recoveredResult(_ sent: IdempotencyRecoveredSend) -> Result<SendResult, IngressError> {
        let apnsID = APNsID(sent.apnsID)
        if sent.outcome == SendOutcome.success.rawValue, let apnsID {
            return .success(SendResult(
                apnsID: apnsID, status: sent.status ?? 200, timestamp: 0, attempts: sent.attempts, latencyMilliseconds: sent.latencyMilliseconds,
                trapHits: sent.trapIDs.map(TrapID.init(rawValue:)), apnsUniqueID: sent.apnsUniqueID))
        }
        var error: IngressError
        let what = "the first send with this key (apns-id \(sent.apnsID)) ended \(sent.outcome)\(sent.reason.map { " (\($0))" } ?? "")"
        if sent.outcome == SendOutcome.rejected.rawValue, let status = sent.status, (400..<500).contains(status) {
            error = IngressError(status: status, type: .apnsRejected, message: "\(what); nothing was sent again")
        } else {
            error = IngressError(
                status: 502, type: .upstream,
                message: "\(what); it may have reached the device, so nothing was sent again (use a new key to send anew)")
            error.outcomeUnknown = true
        }
        error.reason = sent.reason
        error.apnsStatus = sent.status
        error.apnsID = apnsID
        error.attempts = sent.attempts
        error.trapHits = sent.trapIDs.map(TrapID.init(rawValue:))
        // APNs' timestamp of a 410: the first answer's `timestamp`, again.
        error.unregisteredAt = sent.unregisteredAt
        return .failure(error)
    }

    /// The first answer again, marked as a replay.
    static func replayResponse(_ answer: IdempotentAnswer) -> HTTPResponse {
        HTTPResponse(
            status: answer.httpStatus, headers: answer.headers.map { HTTPHeader($0.name, $0.value) } + [HTTPHeader(replayedHeader, "true")],
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

    /// The bytes a request hash is taken over: `kind`, then each part, then
    /// `value` with every object's members sorted, so the same request with
    /// its members in another order is the same request.
    static func canonical(_ kind: String, _ parts: [String], _ value: JSONValue) -> [UInt8] {
        var output = Array(kind.utf8)
        for part in parts {
            output.append(0)
            output += part.utf8
        }
        output.append(0)
        canonicalJSON(value, into: &output)
        return output
    }

    private static func canonicalJSON(_ value: JSONValue, into output: inout [UInt8]) {
        switch value {
        case .object(let object):
            output.append(UInt8(ascii: "{"))
            for (index, member) in object.members.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }).enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                JSONValue.string(member.key).encode(into: &output)
                output.append(UInt8(ascii: ":"))
                canonicalJSON(member.value, into: &output)
            }
            output.append(UInt8(ascii: "}"))
        case .array(let items):
            output.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                canonicalJSON(item, into: &output)
            }
            output.append(UInt8(ascii: "]"))
        default:
            value.encode(into: &output)
        }
    }
}

extension Ingress {
    /// Takes a batch item's `idempotencyKey` out of it (the send decoder
    /// knows no such field), checked; nil without one.
    static func itemIdempotencyKey(_ item: inout JSONValue, path: String) throws(IngressError) -> String? {
        guard case .object(var object) = item, let value = object["idempotencyKey"] else { return nil }
        let field = "\(path).idempotencyKey"
        guard case .string(let key) = value else { throw .invalid(field, "must be a string, not \(value.typeName)") }
        try checkIdempotencyKey(key, field: field)
        object["idempotencyKey"] = nil
        item = .object(object)
        return key
    }

    /// Plans a keyed batch item: true when it is to be sent (or replayed from
    /// the store) like any item; false when it repeats the key of an earlier
    /// item of this batch with the same send, and was planned as that item's
    /// repeat. The same key with another send is refused (422).
    func planKeyedItem(
        _ key: String, item: JSONValue, index: Int, app: String, fanOut: Bool, call: Call, plan: inout BatchPlan, firstWithKey: inout [String: Int]
    ) throws(IngressError) -> Bool {
        let field = "items[\(index)].idempotencyKey"
        // One key names one send, as one apnsId does.
        guard !fanOut else { throw .invalid(field, "names one send: give it with token, not tokens") }
        let keyed = Self.keyedSend(key, field: field, app: app, call: call, canonical: Self.canonical("send", [], item))
        guard let first = firstWithKey[keyed.claim.keyHash] else {
            firstWithKey[keyed.claim.keyHash] = index
            plan.keys[index] = keyed
            return true
        }
        guard plan.keys[first]?.claim.requestHash == keyed.claim.requestHash else { throw IdempotencyGate.keyReused(keyed) }
        plan.repeats.append((position: plan.sends.count, item: index, first: first))
        // A placeholder until the batch has run; nothing is sent for it.
        plan.items.append(.refused(IngressError(status: 409, type: .idempotencyKeyInFlight, message: "\(field) repeats items[\(first)]'s key", field: field)))
        plan.sends.append(.init(item: Int32(index), tokenIndex: 0, token: nil))
        return false
    }

    /// Answers each item that repeated an earlier item's key with that item's
    /// answer, marked as a replay; nothing was sent for it.
    func answerRepeats(_ plan: BatchPlan, _ run: inout BatchRun) {
        for entry in plan.repeats {
            if let answer = run.answers[entry.first] {
                run.entries[entry.position] = Self.replayEntry(item: entry.item, answer)
                if answer.httpStatus == 200 { run.succeeded += 1 }
                idempotency.onReplay?(plan.keys[entry.first]?.app ?? "")
            } else {
                var error = IngressError(
                    status: 409, type: .idempotencyKeyInFlight,
                    message: "items[\(entry.item)].idempotencyKey repeats items[\(entry.first)]'s key, which was not sent; retry with the key to send it once",
                    field: "items[\(entry.item)].idempotencyKey")
                error.retryAfter = 1
                run.entries[entry.position] = Self.batchEntry(item: entry.item, tokenIndex: nil, result: .failure(error))
            }
        }
    }
}
