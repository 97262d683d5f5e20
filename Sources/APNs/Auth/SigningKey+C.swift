internal import COpenSSL

#if canImport(Glibc)
    import Glibc
#endif

/// Owns the OpenSSL EVP_PKEY of a signing key.
final class PrivateKeyHandle: @unchecked Sendable {
    // The EVP_PKEY is never mutated after init; OpenSSL 3 allows concurrent
    // signing with one key as long as each call uses its own EVP_MD_CTX.
    private let key: OpaquePointer

    init(pem: [UInt8], field: String) throws(CredentialError) {
        // BIO_new_mem_buf borrows the bytes without copying, so the read must
        // happen while they are pinned: after withUnsafeBytes returns, an
        // optimised build may already have freed the array (a release-build
        // benchmark failed intermittently with KeyNotPKCS8 that way).
        let parsed: OpaquePointer?? = pem.withUnsafeBytes { bytes in
            guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return .none }
            defer { BIO_free(bio) }
            return .some(PEM_read_bio_PrivateKey(bio, nil, nil, nil))
        }
        guard let read = parsed else {
            throw CredentialError(.notPKCS8, field: field, message: "\(field) could not be read into OpenSSL")
        }
        guard let key = read else {
            ERR_clear_error()
            throw CredentialError(.notPKCS8, field: field, message: "\(field) is not a readable PKCS#8 private key")
        }
        let type = apns_relay_evp_pkey_id(key)
        guard type == EVP_PKEY_EC else {
            EVP_PKEY_free(key)
            throw CredentialError(
                .wrongKeyType, field: field, message: "\(field) holds \(Self.describe(keyType: type)); APNs needs an EC P-256 key (ES256)")
        }
        var group = [CChar](repeating: 0, count: 64)
        let curve = apns_relay_evp_pkey_ec_group_name(key, &group, group.count) == 1
            ? String(decoding: group.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "unknown"
        guard curve == "prime256v1" else {
            EVP_PKEY_free(key)
            throw CredentialError(.wrongKeyType, field: field, message: "\(field) holds an EC key on \(curve); APNs needs P-256 (prime256v1)")
        }
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// "an RSA key", "an ED25519 key": what was found instead of EC, by OpenSSL's short name.
    private static func describe(keyType: Int32) -> String {
        if keyType == EVP_PKEY_RSA { return "an RSA key" }
        guard let name = OBJ_nid2sn(keyType).map({ String(cString: $0) }), name != "UNDEF" else {
            return "a non-EC key (OpenSSL type \(keyType))"
        }
        return ("AEIOU".contains(name.prefix(1)) ? "an " : "a ") + name + " key"
    }

    func sign(_ message: [UInt8]) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { fatalError("OpenSSL could not allocate a digest context") }
        defer { EVP_MD_CTX_free(context) }
        precondition(EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1, "EVP_DigestSignInit failed")
        var length = 0
        var der = [UInt8](repeating: 0, count: 80)
        length = der.count
        let status = message.withUnsafeBufferPointer { input in
            EVP_DigestSign(context, &der, &length, input.baseAddress, input.count)
        }
        precondition(status == 1, "ES256 signing failed")
        return Self.joseSignature(der: Array(der.prefix(length)))
    }

    /// DER ECDSA-Sig-Value to JOSE R‖S.
    private static func joseSignature(der: [UInt8]) -> [UInt8] {
        let signature = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var pointer = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &pointer, buffer.count)
        }
        guard let signature else { fatalError("OpenSSL produced an unreadable ECDSA signature") }
        defer { ECDSA_SIG_free(signature) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(signature, &r, &s)
        var output = [UInt8](repeating: 0, count: 64)
        output.withUnsafeMutableBufferPointer { buffer in
            _ = BN_bn2binpad(r, buffer.baseAddress, 32)
            _ = BN_bn2binpad(s, buffer.baseAddress! + 32, 32)
        }
        return output
    }

    func publicKeyPEM() -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PUBKEY(bio, key) == 1 else { return "" }
        var data: UnsafeMutablePointer<CChar>?
        let length = apns_relay_bio_get_mem_data(bio, &data)
        guard length > 0, let data else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }

    func publicKeyDER() -> [UInt8] {
        var output: UnsafeMutablePointer<UInt8>?
        let length = i2d_PUBKEY(key, &output)
        guard length > 0, let output else { return [] }
        defer { apns_relay_openssl_free(output) }
        return Array(UnsafeBufferPointer(start: output, count: Int(length)))
    }
}

extension SigningKey {
    /// True for a file directly inside `$CREDENTIALS_DIRECTORY` (systemd credentials).
    static func isSystemdCredential(_ path: String) -> Bool {
        guard let directory = getenv("CREDENTIALS_DIRECTORY").map({ String(cString: $0) }), !directory.isEmpty else { return false }
        let prefix = directory.hasSuffix("/") ? directory : directory + "/"
        return path.hasPrefix(prefix) && !path.dropFirst(prefix.count).contains("/")
    }

    /// Reads a key file, refusing one that is missing, a directory, or
    /// readable by group or others (a leaked .p8 can push to every app of the team).
    static func readProtectedFile(_ path: String) throws(CredentialError) -> [UInt8] {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let code = errno
            let reason = String(cString: strerror(code))
            // Only a path that is not there is "missing"; EACCES on a parent
            // directory is a permissions problem and must not read as a typo.
            if code == ENOENT || code == ENOTDIR {
                throw CredentialError(.keyFileMissing, field: "keyPath", message: "keyPath \(path) does not exist (\(reason))")
            }
            throw CredentialError(.keyFileUnreadable, field: "keyPath", message: "keyPath \(path) cannot be inspected (\(reason))")
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR:
            throw CredentialError(
                .keyFileUnreadable, field: "keyPath", message: "keyPath \(path) is a directory, not a regular file; point it at the .p8 file")
        default:
            throw CredentialError(.keyFileUnreadable, field: "keyPath", message: "keyPath \(path) is not a regular file")
        }
        let permissions = info.st_mode & 0o777
        // systemd's LoadCredential hands a key over in a directory only the
        // service can enter, and where it grants access by ACL the file reads
        // as 0440 owned by root. Group bits are fine there; others never are.
        let forbidden: mode_t = isSystemdCredential(path) ? 0o007 : 0o077
        guard permissions & forbidden == 0 else {
            let digits = String(permissions, radix: 8)
            let mode = String(repeating: "0", count: 3 - digits.count) + digits
            throw CredentialError(
                .keyFileTooOpen, field: "keyPath",
                message: "keyPath \(path) can be accessed by group or others (mode 0\(mode)); "
                    + "a .p8 key must be private to its owner: run chmod 600 \(path)")
        }
        guard let file = fopen(path, "rb") else {
            throw CredentialError(.keyFileUnreadable, field: "keyPath", message: "keyPath \(path) cannot be read (\(String(cString: strerror(errno))))")
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count > 0 { bytes.append(contentsOf: chunk[0..<count]) }
            if count < chunk.count { break }
            if bytes.count > 64 * 1024 {
                throw CredentialError(.notPKCS8, field: "keyPath", message: "keyPath \(path) is far larger than a .p8 key")
            }
        }
        return bytes
    }
}

extension SigningKey {
    /// A fresh P-256 key as a PKCS#8 PEM, the shape of an App Store Connect
    /// `.p8`. For the demo and tests, which need a key the mock APNs knows.
    public static func generatePKCS8PEM() -> [UInt8] {
        guard let key = apns_relay_ec_p256_generate() else { return [] }
        defer { EVP_PKEY_free(key) }
        guard let bio = BIO_new(BIO_s_mem()) else { return [] }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) == 1 else { return [] }
        var data: UnsafeMutablePointer<CChar>?
        let length = apns_relay_bio_get_mem_data(bio, &data)
        guard length > 0, let data else { return [] }
        return Array(UnsafeRawBufferPointer(start: data, count: length))
    }
}
