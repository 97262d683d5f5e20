internal import COpenSSL

/// A freshly generated EC P-256 key and a self-signed certificate for local
/// servers (the mock APNs), written as PEM files.
public struct SelfSignedCertificate: Sendable {
    public let certificateFile: String
    public let privateKeyFile: String

    /// Generates a certificate valid for `days` with the given subject
    /// alternative names (`DNS:localhost`, `IP:127.0.0.1`), and writes the
    /// PEM files into `directory` (the key with mode 0600).
    public static func generate(
        in directory: String, subjectAltNames: [String] = ["DNS:localhost", "IP:127.0.0.1"], days: Int = 30
    ) throws(HTTP2Error) -> SelfSignedCertificate {
        guard let key = apns_relay_ec_p256_generate() else { throw TLSContext.failure("EC key generation") }
        defer { EVP_PKEY_free(key) }
        guard let certificate = X509_new() else { throw TLSContext.failure("X509_new") }
        defer { X509_free(certificate) }
        X509_set_version(certificate, 2)
        var serial = [UInt8](repeating: 0, count: 16)
        _ = RAND_bytes(&serial, Int32(serial.count))
        serial[0] &= 0x7F
        let number = BN_bin2bn(serial, Int32(serial.count), nil)
        BN_to_ASN1_INTEGER(number, X509_get_serialNumber(certificate))
        BN_free(number)
        X509_gmtime_adj(X509_getm_notBefore(certificate), -3600)
        X509_gmtime_adj(X509_getm_notAfter(certificate), days * 86_400)
        X509_set_pubkey(certificate, key)
        let name = X509_get_subject_name(certificate)
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, "apns-relay mock", -1, -1, 0)
        X509_set_issuer_name(certificate, name)

        var context = X509V3_CTX()
        X509V3_set_ctx(&context, certificate, certificate, nil, nil, 0)
        for (nid, value) in [(NID_subject_alt_name, subjectAltNames.joined(separator: ",")), (NID_basic_constraints, "critical,CA:TRUE")] {
            guard let extensionValue = X509V3_EXT_nconf_nid(nil, &context, nid, value) else { throw TLSContext.failure("certificate extension \(value)") }
            X509_add_ext(certificate, extensionValue, -1)
            X509_EXTENSION_free(extensionValue)
        }
        guard X509_sign(certificate, key, EVP_sha256()) > 0 else { throw TLSContext.failure("X509_sign") }

        let certificateFile = directory + "/mock-apns-cert.pem"
        let privateKeyFile = directory + "/mock-apns-key.pem"
        try write(certificateFile, mode: 0o644) { PEM_write_bio_X509($0, certificate) }
        try write(privateKeyFile, mode: 0o600) { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) }
        return SelfSignedCertificate(certificateFile: certificateFile, privateKeyFile: privateKeyFile)
    }

    private static func write(_ path: String, mode: mode_t, _ body: (OpaquePointer) -> Int32) throws(HTTP2Error) {
        guard let bio = BIO_new(BIO_s_mem()) else { throw TLSContext.failure("BIO_new") }
        defer { BIO_free(bio) }
        guard body(bio) == 1 else { throw TLSContext.failure("PEM encoding") }
        var data: UnsafeMutablePointer<CChar>?
        let length = apns_relay_bio_get_mem_data(bio, &data)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode)
        guard fd >= 0, let data else { throw HTTP2Error(.tls, "cannot write \(path)") }
        defer { close(fd) }
        fchmod(fd, mode)
        guard Glibc.write(fd, data, length) == length else { throw HTTP2Error(.tls, "cannot write \(path)") }
    }
}

#if canImport(Glibc)
    import Glibc
#endif
