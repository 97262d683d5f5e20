/// A keyed send whose key is still `in_flight` in the store, its lease run
/// out, while its audit row says it finished: the relay that sent it answered
/// its caller but could not record the answer (Postgres was away, or the
/// relay stopped before it could). The row is the durable truth of what was
/// sent, so a repeat is answered from it and nothing is sent again.
public struct IdempotencyRecoveredSend: Sendable, Hashable {
    /// The claim token that held the key: only that claim is settled over.
    public var owner: String
    /// The audit row's apns-id, outcome (`success`, `rejected`, `failed`,
    /// `cancelled` or `unknown`), APNs status, reason and attempts.
    public var apnsID: String
    public var outcome: String
    public var status: Int?
    public var reason: String?
    public var errorType: String?
    public var attempts: Int
    public var latencyMilliseconds: Double
    public var retried: Bool
    public var trapIDs: [String]
    public var apnsUniqueID: String?

    public init(
        owner: String, apnsID: String, outcome: String, status: Int?, reason: String?, errorType: String?, attempts: Int,
        latencyMilliseconds: Double, retried: Bool, trapIDs: [String], apnsUniqueID: String?
    ) {
        self.owner = owner
        self.apnsID = apnsID
        self.outcome = outcome
        self.status = status
        self.reason = reason
        self.errorType = errorType
        self.attempts = attempts
        self.latencyMilliseconds = latencyMilliseconds
        self.retried = retried
        self.trapIDs = trapIDs
        self.apnsUniqueID = apnsUniqueID
    }
}
