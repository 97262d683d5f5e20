/// The answer a keyed send got the first time, as the store keeps it and a
/// replay gives back byte for byte.
public struct IdempotentAnswer: Sendable, Hashable {
    /// The send's apns-id, APNs' status (nil when APNs never answered), reason and attempts.
    public var apnsID: String?
    public var status: Int?
    public var reason: String?
    public var attempts: Int
    /// The HTTP answer the caller got: status, headers, body.
    public var httpStatus: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(
        apnsID: String?, status: Int?, reason: String?, attempts: Int, httpStatus: Int, headers: [(name: String, value: String)], body: [UInt8]
    ) {
        self.apnsID = apnsID
        self.status = status
        self.reason = reason
        self.attempts = attempts
        self.httpStatus = httpStatus
        self.headers = headers
        self.body = body
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.apnsID == rhs.apnsID && lhs.status == rhs.status && lhs.reason == rhs.reason && lhs.attempts == rhs.attempts
            && lhs.httpStatus == rhs.httpStatus && lhs.body == rhs.body
            && lhs.headers.map(\.name) == rhs.headers.map(\.name) && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(apnsID)
        hasher.combine(httpStatus)
        hasher.combine(body)
    }
}

/// One keyed send asking for its key: who, which key (hashed), what request.
public struct IdempotencyClaim: Sendable, Hashable {
    /// The API key's name: keys of different callers never meet.
    public var caller: String
    /// SHA-256 hex of caller, a newline and the key.
    public var keyHash: String
    /// SHA-256 hex of the canonical request.
    public var requestHash: String
    /// Unique to this attempt at the key: only the claim that holds the key
    /// may complete or release it (a lease taken over is not its any more).
    public var token: String

    public init(caller: String, keyHash: String, requestHash: String, token: String) {
        self.caller = caller
        self.keyHash = keyHash
        self.requestHash = requestHash
        self.token = token
    }
}

/// What the store says about a claimed key.
public enum IdempotencyVerdict: Sendable, Hashable {
    /// The key is this request's: send, then ``IdempotencyStore/complete(_:answer:)`` or ``IdempotencyStore/release(_:)``.
    case claimed
    /// Another request with this key is being sent now (on this relay or another).
    case inFlight
    /// The key was used for a different request within the window.
    case reused
    /// The first send's answer: give it back, send nothing.
    case done(IdempotentAnswer)
    /// The key's lease ran out with no answer recorded, but the audit holds
    /// the row of its send: answer from that row (and settle the key with
    /// ``IdempotencyStore/settle(_:over:answer:)``), send nothing.
    case recovered(IdempotencyRecoveredSend)
}

/// Where the ingress keeps `Idempotency-Key`s, so a repeated key is answered
/// with the first send's result on any relay of the deployment. Declared
/// here so the ingress does not import the audit module; the executable
/// wires the Postgres implementation (`PostgresIdempotencyStore`).
///
/// Sends without a key never reach it.
public protocol IdempotencyStore: Sendable {
    /// Claims the key for this request, or says why not. Throws when the
    /// store cannot be reached: the ingress then refuses the send (503)
    /// rather than risk sending it twice.
    func claim(_ claim: IdempotencyClaim) async throws -> IdempotencyVerdict
    /// Records the answer of a claimed key's send; repeats get it back.
    func complete(_ claim: IdempotencyClaim, answer: IdempotentAnswer) async throws
    /// Gives a claimed key back unused: nothing was sent (refused before the
    /// first attempt), so a retry with the key may send.
    func release(_ claim: IdempotencyClaim) async throws
    /// Records `answer` for a key whose send was ``IdempotencyVerdict/recovered(_:)``
    /// from the audit, over the claim `owner` that sent it (and never
    /// recorded its answer). A key another request settled meanwhile is left alone.
    func settle(_ claim: IdempotencyClaim, over owner: String, answer: IdempotentAnswer) async throws
}
