import APNs
import HTTPServer
import Relay
import RelayJSON
import RelayBasics

/// `POST /v1/send` and `POST /v1/describe`, and the one way every route
/// sends (``perform(_:_:_:_:)``): the send budget, then the batch runner's
/// one send (which answers a failure, drain-aware). Its dependencies: the
/// service, the batch runner (which owns the send budget) and the
/// idempotency gate.
struct SendController: Sendable {
    let service: RelayService
    let batches: BatchRunner
    let idempotency: IdempotencyGate

    /// Sends admitted and not yet finished across every request.
    var sendBudget: SendBudget { batches.budget }

    /// `POST /v1/send`: one send, answered with its result or its error.
    /// With an `Idempotency-Key`, sent once per key (``IdempotencyGate/runKeyed(_:_:render:_:)``).
    @Sendable func send(_ call: Ingress.Call) async throws(IngressError) -> HTTPResponse {
        let key = try IdempotencyKeys.headerIdempotencyKey(call.request)
        let value = try RequestReading.parseBody(call.request)
        let request = try decodeSend(value, call)
        guard let key else {
            return SendAnswers.sendResponse(.success(try await perform(request.app, request.environment, request.operations[0], call)))
        }
        let keyed = IdempotencyKeys.keyedSend(key, field: IdempotencyKeys.idempotencyHeader, app: request.app, call: call, canonical: IdempotencyKeys.canonical("send", [], value))
        switch try await idempotency.runKeyed(keyed, call, { call throws(IngressError) in
            try await perform(request.app, request.environment, request.operations[0], call)
        }) {
        case .replay(let answer):
            return SendAnswers.replayResponse(answer)
        case .sent(let result):
            let response = SendAnswers.sendResponse(result)
            await idempotency.recordKeyed(keyed, result, response)
            // A failure is thrown as without a key, so the error steps treat it alike.
            if case .failure(let error) = result { throw error }
            return response
        }
    }

    /// `POST /v1/describe`: the exact APNs request a send would make; nothing is sent.
    /// A dry run records nothing: no audit row, no metric, whatever the answer.
    @Sendable func describe(_ call: Ingress.Call) async throws(IngressError) -> HTTPResponse {
        let request = try decodeSend(try RequestReading.parseBody(call.request), call, recordsRefusal: false)
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
        _ value: JSONValue, _ call: Ingress.Call, path: String = "", allowFanOut: Bool = false, recordsRefusal: Bool = true,
        snapshots: SendRequestDecoder.SnapshotMemo? = nil
    ) throws(IngressError) -> SendRequest {
        do {
            let request = try SendRequestDecoder.decode(value, path: path, allowFanOut: allowFanOut, snapshots: snapshots)
            try service.authorize(call.key, app: request.app, field: path.isEmpty ? "app" : "\(path).app")
            return request
        } catch {
            var error = error
            if recordsRefusal, let refusal = error.refusal, (try? service.authorize(call.key, app: refusal.app)) != nil {
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
    func perform(_ app: String, _ environment: Environment, _ operation: RelayOperation, _ call: Ingress.Call) async throws(IngressError) -> SendResult {
        guard sendBudget.admit(1) else { throw overloaded(sends: 1) }
        defer { sendBudget.release(1) }
        return try await batches.performAdmitted(app, environment, operation, call)
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
