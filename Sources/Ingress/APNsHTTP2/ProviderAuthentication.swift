import HTTPServer
import ProviderTokens
import Relay
import Tracing

/// The HTTP/2 APNs ingress' authentication: the ES256 provider token an APNs
/// client library already sends, checked as APNs checks it
/// (``ProviderTokenVerifier``: algorithm, `kid`, `iss`, `iat` within the
/// hour, each distinct token verified once), against the provider keys the
/// API-key entries name. The key that verified it is the caller: its name
/// goes into the audit row, its `apps` decide which topics it may use.
/// A refusal is 403 with APNs' reason (Missing/Invalid/ExpiredProviderToken).
///
/// A request without `authorization` on a connection whose TLS client
/// certificate verified against `apns_ingress.client_ca_file` is the caller
/// of the key naming that certificate (``APIKey/clientCertificate``), as
/// APNs' certificate-based authentication works; a verified certificate no
/// key names is 403 BadCertificate. A token, when sent, decides.
struct ProviderAuthentication: IngressMiddleware {
    let verifier: ProviderTokenVerifier
    /// API keys by their provider key's id.
    let keysByProviderKeyID: [String: APIKey]
    /// API keys that name a client certificate, in configuration order.
    let keysByCertificate: [(APIKey.ClientCertificateMatch, APIKey)]

    /// - Throws: when a configured public key is not a P-256 PEM.
    init(keyring: APIKeyring, now: @escaping @Sendable () -> Int64) throws {
        var byID: [String: APIKey] = [:]
        var registered: [ProviderTokenVerifier.RegisteredKey] = []
        keysByCertificate = keyring.keys.compactMap { key in key.clientCertificate.map { ($0, key) } }
        for key in keyring.keys {
            guard let provider = key.providerKey else { continue }
            byID[provider.keyID] = key
            registered.append(ProviderTokenVerifier.RegisteredKey(keyID: provider.keyID, teamID: provider.teamID, publicKeyPEM: provider.publicKeyPEM))
        }
        verifier = try ProviderTokenVerifier(keys: registered, now: now)
        keysByProviderKeyID = byID
    }

    func handle(_ request: HTTPRequest, _ context: IngressContext, next: IngressResponder) async throws(IngressError) -> HTTPResponse {
        if let certificate = request.clientCertificate, request.header("authorization") == nil {
            guard let key = keysByCertificate.first(where: { $0.0.matches(sha256: certificate.sha256, subject: certificate.subject) })?.1 else {
                var error = IngressError(status: 403, type: .unauthorized, message: "no API key names this client certificate", field: "client certificate")
                error.reason = "BadCertificate"
                throw error
            }
            return try await next(request, authenticated(key, context))
        }
        switch verifier.verdict(authorization: request.header("authorization")) {
        case .rejected(let reason):
            var error = IngressError(status: 403, type: .unauthorized, message: "the provider token was refused: \(reason)", field: "authorization")
            error.reason = reason
            throw error
        case .valid(let keyID):
            guard let key = keysByProviderKeyID[keyID] else {
                var error = IngressError(status: 403, type: .unauthorized, message: "no API key names this provider key", field: "authorization")
                error.reason = "InvalidProviderToken"
                throw error
            }
            return try await next(request, authenticated(key, context))
        }
    }

    /// The context with `key` as the caller (and the span saying so).
    private func authenticated(_ key: APIKey, _ context: IngressContext) -> IngressContext {
        context.spanAttributes?.set("apns_relay.caller", key.name)
        var context = context
        context.key = key
        return context
    }
}
