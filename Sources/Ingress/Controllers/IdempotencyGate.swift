import APNs
import HTTPServer
import Logging
import Relay
import RelayBasics

/// A send with a key: its claim on the store, and its app (the replay metric's label).
struct KeyedSend: Sendable {
    var claim: IdempotencyClaim
    var app: String
    /// The key as the caller gave it, for error messages to that caller.
    var key: String
    /// Where the caller put it: `Idempotency-Key` or `items[3].idempotencyKey`.
    var field: String
}

/// What a keyed send came to: the first answer given back, or this request's own send.
enum KeyedOutcome: Sendable {
    case replay(IdempotentAnswer)
    case sent(Result<SendResult, IngressError>)
}

/// The one door of keyed sends (docs/api.md, "Idempotency keys"): claims a
/// key in the ``IdempotencyStore`` every relay of the deployment shares,
/// answers a repeat from the first send's answer (or, when that answer was
/// never recorded, from its audit row), and keeps what a send answered,
/// holding it in ``UnsettledKeyAnswers`` while the store is away. Routes
/// parse and check keys (``IdempotencyKeys/headerIdempotencyKey(_:)``) and render
/// answers; this type owns every lookup and write of the store.
struct IdempotencyGate: Sendable {
    /// Where keys are kept; nil: keyed sends are refused (503).
    let store: (any IdempotencyStore)?
    /// Answers of keyed sends the store could not record yet.
    let unsettled: UnsettledKeyAnswers
    /// Called with the app of each send answered from an earlier one's key (a metric).
    let onReplay: (@Sendable (_ app: String) -> Void)?
    let logger: Logger

    init(store: (any IdempotencyStore)?, onReplay: (@Sendable (_ app: String) -> Void)?, logger: Logger) {
        self.store = store
        unsettled = UnsettledKeyAnswers()
        self.onReplay = onReplay
        self.logger = logger
    }

    /// Whether this relay keeps keys (an audit database): the HTTP/2 APNs
    /// listener then makes a client's `apns-id` its send's key.
    var keepsKeys: Bool { store != nil }

    /// Stops recording held answers (the drain); returns how many were left.
    func stopSettling() -> Int { unsettled.stop() }

    /// Sends once per key: claims it, runs `send` when this request holds it,
    /// and gives back the first answer when an earlier request already sent.
    /// The caller then answers and hands the answer to ``recordKeyed(_:_:_:)``.
    ///
    /// - Throws: 409 `IdempotencyKeyInFlight` while another request with the
    ///   key is being sent, 422 `IdempotencyKeyReused` for a key used with
    ///   another request, 503 `Unavailable` when the store cannot answer
    ///   (nothing is sent: a duplicate push is what the key prevents).
    ///
    /// - Parameter render: the route's answer to a result, for a send
    ///   recovered from its audit row (``recoveredResult(_:)``): the store
    ///   keeps that answer for later repeats, so it must be in the route's
    ///   shape (`/v1/send`'s by default; APNs' on the HTTP/2 APNs ingress).
    func runKeyed(
        _ keyed: KeyedSend, _ call: Ingress.Call, render: (Result<SendResult, IngressError>) -> HTTPResponse = SendAnswers.sendResponse,
        _ send: (Ingress.Call) async throws(IngressError) -> SendResult
    ) async throws(IngressError) -> KeyedOutcome {
        guard let store else {
            throw Self.storeUnavailable(keyed, "idempotency keys need the audit database (audit.database_url)", retryAfter: 30)
        }
        // Answered on this relay while the store was away: that answer,
        // whatever the store's lease on the key says meanwhile.
        if let held = unsettled.answer(for: keyed.claim) {
            guard held.claim.requestHash == keyed.claim.requestHash else { throw Self.keyReused(keyed) }
            onReplay?(keyed.app)
            return .replay(held.answer)
        }
        let verdict: IdempotencyVerdict
        do {
            verdict = try await store.claim(keyed.claim)
        } catch {
            logger.error("idempotency key claim failed", metadata: ["caller": "\(keyed.claim.caller)", "error": "\(error)"])
            throw Self.storeUnavailable(keyed, "the idempotency store (the audit database) is unavailable", retryAfter: 5)
        }
        switch verdict {
        case .claimed:
            var call = call
            call.idempotencyKeyHash = keyed.claim.keyHash
            do throws(IngressError) {
                return .sent(.success(try await send(call)))
            } catch {
                return .sent(.failure(error))
            }
        case .done(let answer):
            onReplay?(keyed.app)
            return .replay(answer)
        case .recovered(let sent):
            // Sent and answered, its answer never recorded: the audit row
            // is what went out. Answered from it; the key is settled so the
            // next repeat reads it without the audit.
            let answer = IdempotencyKeys.recoveredAnswer(sent, render: render)
            do {
                try await store.settle(keyed.claim, over: sent.owner, answer: answer)
            } catch {
                logger.warning("idempotency key answered from its audit row but not settled; the next repeat reads the row again", metadata: [
                    "caller": "\(keyed.claim.caller)", "apns_id": "\(sent.apnsID)", "error": "\(error)",
                ])
            }
            logger.notice("idempotency key answered from its send's audit row (its answer was never recorded); nothing sent again", metadata: [
                "caller": "\(keyed.claim.caller)", "apns_id": "\(sent.apnsID)", "outcome": "\(sent.outcome)",
            ])
            onReplay?(keyed.app)
            return .replay(answer)
        case .inFlight:
            var error = IngressError(
                status: 409, type: .idempotencyKeyInFlight,
                message: "\(keyed.field) \"\(keyed.key)\": a request with this key is being sent now; retry after it is answered to get its result",
                field: keyed.field)
            error.retryAfter = 1
            throw error
        case .reused:
            throw Self.keyReused(keyed)
        }
    }

    /// 503 `Unavailable`: fail closed, since a duplicate push is what the key prevents.
    static func storeUnavailable(_ keyed: KeyedSend, _ why: String, retryAfter: Int) -> IngressError {
        var error = IngressError(
            status: 503, type: .unavailable, message: "\(keyed.field): \(why); nothing was sent, retry later with the same key", field: keyed.field)
        error.retryAfter = retryAfter
        return error
    }

    /// 422 `IdempotencyKeyReused`: the key names another request.
    static func keyReused(_ keyed: KeyedSend) -> IngressError {
        IngressError(
            status: 422, type: .idempotencyKeyReused,
            message: "\(keyed.field) \"\(keyed.key)\" was already used for a different request (the body differs from the first send's) within ingress.idempotency_window_seconds; use a new key for a new send",
            field: keyed.field)
    }

    /// Keeps what a keyed send answered for its repeats, or gives the key
    /// back when nothing was attempted (refused before the first attempt: a
    /// retry with the key may send). A store that fails here is logged: the
    /// send was made and its caller still gets its answer.
    /// Returns the answer kept, nil when the key was given back.
    @discardableResult
    func recordKeyed(_ keyed: KeyedSend, _ result: Result<SendResult, IngressError>, _ response: HTTPResponse) async -> IdempotentAnswer? {
        guard let store else { return nil }
        let answer: IdempotentAnswer? = switch result {
        case .success(let result):
            Self.answer(response, apnsID: result.apnsID.description, status: result.status, reason: nil, attempts: result.attempts)
        case .failure(let error) where (error.attempts ?? 0) > 0:
            Self.answer(response, apnsID: error.apnsID?.description, status: error.apnsStatus, reason: error.reason, attempts: error.attempts ?? 0)
        case .failure:
            nil
        }
        do {
            if let answer {
                try await store.complete(keyed.claim, answer: answer)
            } else {
                try await store.release(keyed.claim)
            }
        } catch {
            guard let answer else {
                logger.error("idempotency key could not be given back; a repeat is refused until the claim's lease ends", metadata: [
                    "caller": "\(keyed.claim.caller)", "error": "\(error)",
                ])
                return nil
            }
            // The send went out: its answer must not be lost with the store
            // away, or the key sends again once its lease ends. Held here
            // (repeats on this relay get it) and recorded when the store answers.
            logger.error("idempotency key answer could not be stored; held and recorded once the store answers", metadata: [
                "caller": "\(keyed.claim.caller)", "error": "\(error)",
            ])
            unsettled.hold(keyed.claim, answer, store: store, logger: logger)
        }
        return answer
    }

    static func answer(_ response: HTTPResponse, apnsID: String?, status: Int?, reason: String?, attempts: Int) -> IdempotentAnswer {
        IdempotentAnswer(
            apnsID: apnsID, status: status, reason: reason, attempts: attempts, httpStatus: response.status,
            headers: response.headers.map { ($0.name, $0.value) }, body: response.body)
    }

}
