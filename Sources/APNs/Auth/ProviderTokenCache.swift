import Synchronization
public import RelayBasics

/// Hands out the current provider token for one set of credentials, minting a
/// new one only when APNs' rules say so.
///
/// APNs rejects tokens older than an hour (ExpiredProviderToken) and tokens
/// replaced more than once per 20 minutes (TooManyProviderTokenUpdates). So
/// the cache re-mints at 50 minutes, never sooner than 20 minutes after the
/// last mint, unless APNs rejected the current token; it mints under a lock,
/// one at a time, and a burst of rejections of the same token causes one
/// re-mint, not one per rejection.
public final class ProviderTokenCache: Sendable {
    /// Age at which the token is replaced.
    public static let refreshAgeSeconds: Int64 = 50 * 60
    /// Least time between two mints, unless invalidated.
    public static let minimumMintIntervalSeconds: Int64 = 20 * 60

    private struct State {
        var token: ProviderToken?
        var invalidated = false
        var mints = 0
    }

    public let credentials: ProviderCredentials
    private let now: @Sendable () -> Int64
    private let onMint: (@Sendable (_ issuedAt: Int64) -> Void)?
    private let state = Mutex(State())

    /// - Parameters:
    ///   - now: the clock in unix seconds (tests inject one).
    ///   - onMint: told the issue time of each new token (for metrics; never the token).
    public init(
        credentials: ProviderCredentials, now: @escaping @Sendable () -> Int64 = { UnixTime.nowSeconds() },
        onMint: (@Sendable (_ issuedAt: Int64) -> Void)? = nil
    ) {
        self.credentials = credentials
        self.now = now
        self.onMint = onMint
    }

    /// The token to use now.
    public func current() -> ProviderToken {
        let (token, minted) = state.withLock { state -> (ProviderToken, Bool) in
            let time = now()
            if let token = state.token {
                let age = time - token.issuedAt
                let due = age >= Self.refreshAgeSeconds || (state.invalidated && age >= 0) || age < 0
                let allowed = state.invalidated || age >= Self.minimumMintIntervalSeconds || age < 0
                if !(due && allowed) { return (token, false) }
            }
            let fresh = ProviderToken(credentials: credentials, issuedAt: time)
            state.token = fresh
            state.invalidated = false
            state.mints += 1
            return (fresh, true)
        }
        if minted { onMint?(token.issuedAt) }
        return token
    }

    /// APNs rejected `token` (ExpiredProviderToken or InvalidProviderToken):
    /// the next ``current()`` mints afresh. A stale token (already replaced)
    /// is ignored, so concurrent rejections cause one re-mint.
    public func invalidate(rejected token: ProviderToken) {
        state.withLock { state in
            if state.token == token { state.invalidated = true }
        }
    }

    /// Like ``invalidate(rejected:)``, for callers that kept only the header value.
    public func invalidate(authorizationHeaderValue: String) {
        state.withLock { state in
            if state.token?.authorizationHeaderValue == authorizationHeaderValue { state.invalidated = true }
        }
    }

    /// Tokens minted so far.
    public var mintCount: Int { state.withLock { $0.mints } }

    /// Seconds since the current token was issued; nil before the first mint.
    public var currentTokenAgeSeconds: Int64? {
        state.withLock { state in state.token.map { now() - $0.issuedAt } }
    }
}
