import Foundation
import RelayJSON

public struct SignerError: Error, CustomStringConvertible {
    public let description: String
}

/// Mints ES256 provider tokens with Python's `cryptography` package, an
/// implementation nobody on this project wrote, so the mock's verifier is
/// checked against a signer that shares none of its code.
public struct IndependentSigner: Sendable {
    public let publicKeyPEM: String
    public let tokens: [String]

    /// A fresh P-256 key and one token per (kid, iss, iat) claim set.
    public init(claims: [(kid: String, iss: String, iat: Int64)]) throws {
        let script = #"""
        import sys, json, base64
        from cryptography.hazmat.primitives.asymmetric import ec, utils
        from cryptography.hazmat.primitives import hashes, serialization
        key = ec.generate_private_key(ec.SECP256R1())
        pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
        tokens = []
        for arg in sys.argv[1:]:
            kid, iss, iat = arg.split(",")
            head = b64(json.dumps({"alg": "ES256", "kid": kid}, separators=(",", ":")).encode())
            body = b64(json.dumps({"iss": iss, "iat": int(iat)}, separators=(",", ":")).encode())
            r, s = utils.decode_dss_signature(key.sign(f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256())))
            tokens.append(f"{head}.{body}." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big")))
        print(json.dumps({"publicKey": pub, "tokens": tokens}))
        """#
        let (status, output) = try ProcessRunner.run(["python3", "-c", script] + claims.map { "\($0.kid),\($0.iss),\($0.iat)" })
        guard status == 0 else {
            throw SignerError(description: "python3 with the cryptography package is needed (scripts/test installs it): \(output)")
        }
        let json = try JSONParser.parse(output)
        guard let key = json["publicKey"]?.stringValue, let minted = json["tokens"]?.arrayValue?.compactMap(\.stringValue) else {
            throw SignerError(description: "unexpected signer output")
        }
        publicKeyPEM = key
        tokens = minted
    }
}
