internal import COpenSSL

/// Owns an SSL_CTX.
final class TLSContext: @unchecked Sendable {
    // The SSL_CTX is configured in init and only read afterwards (SSL_new),
    // which OpenSSL allows from any thread.
    let context: OpaquePointer

    /// A client context: TLS 1.2+, ALPN h2, peer verification on.
    init(client configuration: TLSClientConfiguration) throws(HTTP2Error) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw Self.failure("SSL_CTX_new") }
        self.context = context
        _ = apns_relay_ssl_ctx_set_min_proto_version(context, TLS1_2_VERSION)
        _ = apns_relay_ssl_ctx_set_nonblocking_modes(context)
        // One read(2) per turn of the connection loop instead of two per TLS
        // record plus one: under load a turn reads many records. Records read
        // ahead but not yet decrypted are invisible to poll():
        // `TLSStream.hasPendingBytes` covers them.
        apns_relay_ssl_ctx_enable_read_ahead(context)
        let protocols = configuration.alpnProtocols.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
        _ = SSL_CTX_set_alpn_protos(context, protocols, UInt32(protocols.count))
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        if let caFile = configuration.caFile {
            guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                throw Self.failure("cannot load CA file \(caFile)")
            }
        } else if SSL_CTX_set_default_verify_paths(context) != 1 {
            throw Self.failure("cannot load the system trust store")
        }
    }

    /// A server context with a certificate chain and key, answering ALPN with h2.
    init(server configuration: TLSServerConfiguration) throws(HTTP2Error) {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw Self.failure("SSL_CTX_new") }
        self.context = context
        _ = apns_relay_ssl_ctx_set_min_proto_version(context, TLS1_2_VERSION)
        _ = apns_relay_ssl_ctx_set_nonblocking_modes(context)
        // As the client: one read(2) per turn, not a header and a body per
        // record (the mock APNs reads every request this way).
        apns_relay_ssl_ctx_enable_read_ahead(context)
        guard SSL_CTX_use_certificate_chain_file(context, configuration.certificateChainFile) == 1,
              SSL_CTX_use_PrivateKey_file(context, configuration.privateKeyFile, SSL_FILETYPE_PEM) == 1,
              SSL_CTX_check_private_key(context) == 1
        else { throw Self.failure("cannot load server certificate or key") }
        if configuration.offerHTTP2 {
            SSL_CTX_set_alpn_select_cb(context, selectHTTP2, nil)
        }
        if let caFile = configuration.clientCAFile {
            // Asked for, not required (no SSL_VERIFY_FAIL_IF_NO_PEER_CERT): a
            // client may authenticate with a token instead. One it sends must
            // verify against this CA, or the handshake fails.
            guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1, let names = SSL_load_client_CA_file(caFile) else {
                throw Self.failure("cannot load client CA file \(caFile)")
            }
            SSL_CTX_set_client_CA_list(context, names)
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        }
    }

    deinit { SSL_CTX_free(context) }

    static func failure(_ what: String) -> HTTP2Error {
        HTTP2Error(.tls, "\(what): \(openSSLErrors())")
    }

    /// Drains OpenSSL's error queue into one line.
    static func openSSLErrors() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages.isEmpty ? "no OpenSSL detail" : messages.joined(separator: "; ")
    }
}

/// ALPN server callback: pick "h2" from the client's list, or refuse.
private let selectHTTP2: @convention(c) (
    OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<UInt8>?, UnsafePointer<UInt8>?,
    UInt32, UnsafeMutableRawPointer?
) -> Int32 = { _, out, outLength, input, inputLength, _ in
    guard let out, let outLength, let input else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    var index = 0
    while index < Int(inputLength) {
        let length = Int(input[index])
        let start = index + 1
        if length == 2, start + 2 <= Int(inputLength), input[start] == UInt8(ascii: "h"), input[start + 1] == UInt8(ascii: "2") {
            out.pointee = input + start
            outLength.pointee = 2
            return SSL_TLSEXT_ERR_OK
        }
        index = start + length
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL
}
