import APNs
import HTTPServer
import Relay
import RelayJSON
import RelayBasics

/// Idempotency keys as requests carry them (docs/api.md, "Idempotency
/// keys"): a send with an `Idempotency-Key` (a batch item's
/// `idempotencyKey`) is sent once per caller and key within
/// `ingress.idempotency_window_seconds`; a repeat gets the first answer
/// back, marked `Idempotency-Replayed: true`, and sends nothing. This is
/// where keys are read and checked, a request's claim and hash are made, and
/// a send recovered from its audit row is answered; ``IdempotencyGate`` owns
/// every lookup and write of the store.
enum IdempotencyKeys {
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
    static func keyedSend(_ key: String, field: String, app: String, call: Ingress.Call, canonical: [UInt8]) -> KeyedSend {
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
        _ sent: IdempotencyRecoveredSend, render: (Result<SendResult, IngressError>) -> HTTPResponse = SendAnswers.sendResponse
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
}
