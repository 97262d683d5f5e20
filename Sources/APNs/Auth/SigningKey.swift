/// An APNs auth key (`.p8`): an EC P-256 private key that signs provider
/// tokens with ES256.
///
/// It never prints itself: `description` shows only the public key's
/// fingerprint, so a key can be logged by accident without harm.
public final class SigningKey: Sendable, CustomStringConvertible, CustomReflectable {
    let handle: PrivateKeyHandle

    /// First 12 hex digits of SHA-256 over the public key (DER); safe to log.
    public let fingerprint: String
    /// The public key as a SubjectPublicKeyInfo PEM, for a mock APNs to verify with.
    public let publicKeyPEM: String

    /// Loads a `.p8` file after checking that only its owner can read it.
    public convenience init(contentsOfFile path: String) throws(CredentialError) {
        let pem = try Self.readProtectedFile(path)
        try self.init(pem: pem, field: "keyPath")
    }

    /// Loads a PKCS#8 PEM held in memory (a secret store, an environment variable).
    public init(pem: [UInt8], field: String = "key") throws(CredentialError) {
        let text = String(decoding: pem, as: UTF8.self)
        if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
            throw CredentialError(.notPKCS8, field: field, message: "\(field) holds an encrypted private key; APNs .p8 keys are unencrypted PKCS#8")
        }
        guard text.contains("-----BEGIN PRIVATE KEY-----") else {
            let found = text.contains("-----BEGIN EC PRIVATE KEY-----") ? " (found a SEC1 \"EC PRIVATE KEY\"; convert with openssl pkcs8 -topk8 -nocrypt)" : ""
            throw CredentialError(.notPKCS8, field: field, message: "\(field) must be a PKCS#8 PEM private key (-----BEGIN PRIVATE KEY-----), as Apple's .p8 files are\(found)")
        }
        handle = try PrivateKeyHandle(pem: pem, field: field)
        publicKeyPEM = handle.publicKeyPEM()
        fingerprint = String(SHA256Digest.hash(handle.publicKeyDER()).hexString.prefix(12))
    }

    /// The ES256 signature of `message` in JOSE form: R‖S, 32 bytes each.
    public func sign(_ message: [UInt8]) -> [UInt8] { handle.sign(message) }

    public var description: String { "SigningKey(P-256, public key \(fingerprint))" }

    // dump() and debuggers see the fingerprint only, never the OpenSSL handle.
    public var customMirror: Mirror { Mirror(self, children: ["fingerprint": fingerprint], displayStyle: .class) }
}
