/// A client certificate a TLS server verified against its client CA: what the
/// HTTP/2 server reads from the handshake and the ingress matches API keys by.
public struct ClientCertificate: Sendable, Hashable {
    /// SHA-256 of its DER encoding, 64 lowercase hex digits:
    /// `openssl x509 -noout -fingerprint -sha256` without the colons.
    public var sha256: String
    /// Its subject in OpenSSL's one-line form (`/O=Example/CN=backend`).
    public var subject: String

    public init(sha256: String, subject: String) {
        self.sha256 = sha256
        self.subject = subject
    }
}
