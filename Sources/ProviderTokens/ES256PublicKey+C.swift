internal import COpenSSL

/// An ES256 (P-256) public key that verifies JOSE signatures.
///
/// Verifies with its own OpenSSL code rather than anything in the
/// relay's signing path: a stand-in that shared the client's logic would
/// agree with the client's bugs.
final class ES256PublicKey: @unchecked Sendable {
    // Safe to share across threads: the EVP_PKEY is never mutated after
    // init, and OpenSSL 3 allows concurrent verification with one key.
    private let key: OpaquePointer

    struct LoadError: Error, CustomStringConvertible {
        var description: String
    }

    /// Loads a SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`) on P-256.
    init(pem: String) throws {
        let bytes = Array(pem.utf8)
        // The BIO borrows the bytes: read while they are pinned (see SigningKey+C.swift).
        let parsed: OpaquePointer?? = bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return .none }
            defer { BIO_free(bio) }
            return .some(PEM_read_bio_PUBKEY(bio, nil, nil, nil))
        }
        guard let read = parsed else {
            throw LoadError(description: "cannot allocate a BIO")
        }
        guard let key = read else {
            throw LoadError(description: "not a PEM public key")
        }
        var group = [CChar](repeating: 0, count: 64)
        guard apns_relay_evp_pkey_id(key) == EVP_PKEY_EC,
              apns_relay_evp_pkey_ec_group_name(key, &group, group.count) == 1,
              String(decoding: group.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1"
        else {
            EVP_PKEY_free(key)
            throw LoadError(description: "public key is not an EC P-256 key")
        }
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// True when `signature` (64 bytes, R‖S) is a valid ES256 signature of `message`.
    func verify(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == 64, let der = Self.derSignature(rawSignature: signature) else { return false }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        let result = der.withUnsafeBufferPointer { signaturePointer in
            message.withUnsafeBufferPointer { messagePointer in
                EVP_DigestVerify(context, signaturePointer.baseAddress, der.count, messagePointer.baseAddress, message.count)
            }
        }
        return result == 1
    }

    /// JOSE R‖S to the DER ECDSA-Sig-Value OpenSSL verifies.
    private static func derSignature(rawSignature: [UInt8]) -> [UInt8]? {
        guard let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = rawSignature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = rawSignature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        var output: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(signature, &output)
        guard length > 0, let output else { return nil }
        defer { apns_relay_openssl_free(output) }
        return Array(UnsafeBufferPointer(start: output, count: Int(length)))
    }
}
