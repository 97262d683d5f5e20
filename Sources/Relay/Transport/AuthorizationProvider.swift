public import APNs

/// Supplies the provider token (JWT) for a send and learns when APNs rejects it.
public protocol AuthorizationProvider: Sendable {
    /// The token to send now, minted or re-minted when due.
    func currentAuthorization() throws -> ProviderAuthorization
    /// APNs rejected `authorization` (ExpiredProviderToken): mint a new one
    /// next time, unless another send already did.
    func invalidate(_ authorization: ProviderAuthorization)
}

/// A provider token ready for the `authorization` header.
///
/// Its description is redacted: the JWT is a credential for an hour and must
/// never reach a log, a trace or an error body.
public struct ProviderAuthorization: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// `bearer <JWT>`.
    public let headerValue: String
    /// Unix seconds the token was issued at.
    public let issuedAt: Int64

    public init(headerValue: String, issuedAt: Int64) {
        self.headerValue = headerValue
        self.issuedAt = issuedAt
    }

    public var description: String { "ProviderAuthorization(issuedAt: \(issuedAt), token: <redacted>)" }
    public var debugDescription: String { description }
}


/// The production provider: a JWT cache per (key, team). The authorization
/// value maps back to the token it came from, so an invalidation names the
/// exact token APNs rejected.
extension ProviderTokenCache: AuthorizationProvider {
    public func currentAuthorization() throws -> ProviderAuthorization {
        let token = current()
        return ProviderAuthorization(headerValue: token.authorizationHeaderValue, issuedAt: token.issuedAt)
    }

    public func invalidate(_ authorization: ProviderAuthorization) {
        invalidate(authorizationHeaderValue: authorization.headerValue)
    }
}
