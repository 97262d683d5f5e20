/// One APNs error reason: what it means, when it is worth retrying,
/// whether the token should be dropped, and which trap it maps to.
///
/// The catalog (``APNsReason/catalog``) mirrors `docs/reference/apns-reasons.tsv`
/// row for row; a test keeps the two identical.
public struct APNsReason: Sendable, Hashable {
    /// The reason string APNs puts in the response body, e.g. `BadDeviceToken`.
    public var name: String
    /// The HTTP status APNs answers with for this reason.
    public var status: Int
    /// When a send that failed with this reason may be tried again; only
    /// `RetryPolicy.decide` (Relay) reads it.
    public var retry: RetryRule
    /// True when the token is dead or wrong and must leave the token store.
    public var dropsToken: Bool
    public var trapID: TrapID?
    /// What APNs means by it.
    public var meaning: String
    /// One line telling the operator what to do.
    public var fix: String

    public init(
        name: String, status: Int, retry: RetryRule, dropsToken: Bool, trapID: TrapID?, meaning: String,
        fix: String
    ) {
        self.name = name
        self.status = status
        self.retry = retry
        self.dropsToken = dropsToken
        self.trapID = trapID
        self.meaning = meaning
        self.fix = fix
    }
}

extension APNsReason {
    /// When a failed send may be retried: the relay's retry decision
    /// (`RetryPolicy.decide` in the Relay module) reads only this, never a
    /// reason's name. Every retry spends the retry budget and must start
    /// before the send deadline.
    public enum RetryRule: String, Sendable, Hashable {
        /// Never: the request itself is wrong, resending changes nothing.
        case never
        /// With the ordinary backoff (a `Retry-After` on the answer is still a floor).
        case withBackoff
        /// With backoff, waiting at least the response's `Retry-After`, which
        /// APNs sends with this reason.
        case honouringRetryAfter
        /// Once, at once, after dropping the provider token so a fresh one is
        /// minted (the token is dropped even when the send is not retried).
        case onceWithFreshToken
        /// On a new connection: the server is closing this one. With the
        /// ordinary backoff; the pool replaces the closing connection itself.
        case onNewConnection
    }
}
