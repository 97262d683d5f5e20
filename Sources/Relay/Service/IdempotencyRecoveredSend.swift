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
    /// APNs' `timestamp` of its 410 Unregistered answer, milliseconds since
    /// the epoch (the row's `apns_timestamp`): the repeat's answer carries it
    /// as the first did.
    public var unregisteredAt: Int64?

    public init(
        owner: String, apnsID: String, outcome: String, status: Int?, reason: String?, errorType: String?, attempts: Int,
        latencyMilliseconds: Double, retried: Bool, trapIDs: [String], apnsUniqueID: String?, unregisteredAt: Int64? = nil
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
        self.unregisteredAt = unregisteredAt
    }
}
