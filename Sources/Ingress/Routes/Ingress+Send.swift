import APNs
import HTTPServer
import Relay
import RelayJSON
import RelayBasics

extension Ingress {
    /// `POST /v1/send`: one send, answered with its result or its error.
    /// With an `Idempotency-Key`, sent once per key (``IdempotencyGate/runKeyed(_:_:render:_:)``).
    @Sendable func send(_ call: Call) async throws(IngressError) -> HTTPResponse {
        let key = try Self.headerIdempotencyKey(call.request)
        let value = try body(call.request)
        let request = try decodeSend(value, call)
        guard let key else {
            return Self.sendResponse(.success(try await perform(request.app, request.environment, request.operations[0], call)))
        }
        let keyed = Self.keyedSend(key, field: Self.idempotencyHeader, app: request.app, call: call, canonical: Self.canonical("send", [], value))
        switch try await idempotency.runKeyed(keyed, call, { call throws(IngressError) in
            try await perform(request.app, request.environment, request.operations[0], call)
        }) {
        case .replay(let answer):
            return Self.replayResponse(answer)
        case .sent(let result):
            let response = Self.sendResponse(result)
            await idempotency.recordKeyed(keyed, result, response)
            // A failure is thrown as without a key, so the error steps treat it alike.
            if case .failure(let error) = result { throw error }
            return response
        }
    }

    /// `POST /v1/describe`: the exact APNs request a send would make; nothing is sent.
    /// A dry run records nothing: no audit row, no metric, whatever the answer.
    @Sendable func describe(_ call: Call) async throws(IngressError) -> HTTPResponse {
        let request = try decodeSend(try body(call.request), call, recordsRefusal: false)
        let description: RequestDescription
        do {
            description = try service.describe(app: request.app, environment: request.environment, request.operations[0])
        } catch {
            throw IngressError(error).withoutSendDetails()
        }
        let body = JSONValue.object(JSONObject([
            ("method", .string(description.method.rawValue)),
            ("url", .string("\(description.origin)\(description.path)")),
            ("headers", .object(JSONObject(description.headers.map { ($0.name, JSONValue.string($0.value)) }))),
            ("payload", description.payload ?? .null),
            ("payloadBytes", .integer(Int64(description.byteCount))),
        ]))
        return .json(200, body.encoded())
    }

    /// Decodes a send body and checks the caller may use its app. An invalid
    /// snapshot of a real send is reported to the relay (audit row, MS008
    /// trap) before the 400; a dry run (`recordsRefusal: false`, describe)
    /// only answers, so it can neither fill the audit nor fire an alert.
    func decodeSend(
        _ value: JSONValue, _ call: Call, path: String = "", allowFanOut: Bool = false, recordsRefusal: Bool = true,
        snapshots: SendRequestDecoder.SnapshotMemo? = nil
    ) throws(IngressError) -> SendRequest {
        do {
            let request = try SendRequestDecoder.decode(value, path: path, allowFanOut: allowFanOut, snapshots: snapshots)
            try authorize(call.key, app: request.app, field: path.isEmpty ? "app" : "\(path).app")
            return request
        } catch {
            var error = error
            if recordsRefusal, let refusal = error.refusal, (try? authorize(call.key, app: refusal.app)) != nil {
                let failure = service.recordRefusal(
                    .invalidSnapshot(refusal.error), app: refusal.app, environment: refusal.environment, operation: refusal.operation,
                    context: call.context)
                error.apnsID = failure.apnsID
                error.attempts = 0
                error.trapHits = failure.trapHits
            }
            throw error
        }
    }

    /// Sends one operation through the relay, mapping a failure to its
    /// answer; refused with 503 Overloaded when the relay already holds
    /// ``Configuration/maximumSendsInFlight`` sends.
    func perform(_ app: String, _ environment: Environment, _ operation: RelayOperation, _ call: Call) async throws(IngressError) -> SendResult {
        guard sendBudget.admit(1) else { throw overloaded(sends: 1) }
        defer { sendBudget.release(1) }
        return try await performAdmitted(app, environment, operation, call)
    }

    /// ``perform(_:_:_:_:)`` for a send already counted in the budget.
    func performAdmitted(_ app: String, _ environment: Environment, _ operation: RelayOperation, _ call: Call) async throws(IngressError) -> SendResult {
        try await batches.performAdmitted(app, environment, operation, call)
    }

    /// The answer to a send that failed.
    func answer(to error: SendFailure) -> IngressError { Self.answer(to: error, draining: isDraining) }

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

    /// 503 Overloaded for `sends` (nil: a batch not yet read) that do not fit in the relay's send budget.
    func overloaded(sends: Int?) -> IngressError {
        let what = switch sends {
        case 1: "this send does"
        case let sends?: "this batch's \(sends) sends do"
        case nil: "no batch does"
        }
        var error = IngressError(
            status: 503, type: .overloaded,
            message: "\(what) not fit: the relay already holds \(sendBudget.inUse) sends in flight, batches at most \(sendBudget.batchLimit) of ingress.max_sends_in_flight \(sendBudget.limit)")
        error.retryAfter = 1
        return error
    }
}
