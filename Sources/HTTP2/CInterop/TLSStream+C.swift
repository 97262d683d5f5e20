internal import COpenSSL
import RelayBasics

#if canImport(Glibc)
    import Glibc
#endif

/// One TLS session over a non-blocking socket. Owned by the connection's thread.
final class TLSStream {
    enum Progress {
        case done
        case wantRead
        case wantWrite
    }

    enum IOResult {
        case bytes(Int)
        case wouldBlock(wantsWrite: Bool)
        case closed
        case failed(String)
    }

    private let ssl: OpaquePointer
    let isClient: Bool
    /// The last read ended wanting more from the socket: whatever OpenSSL
    /// still buffers is part of a record, which only the socket can complete.
    private var lastReadBlocked = false

    /// - Parameter serverName: the host name or IP address the certificate must match (clients).
    init(context: TLSContext, socket: Int32, client: Bool, serverName: String?) throws(HTTP2Error) {
        guard let ssl = SSL_new(context.context) else { throw TLSContext.failure("SSL_new") }
        SSL_set_fd(ssl, socket)
        if client {
            SSL_set_connect_state(ssl)
            if let serverName {
                // A name that cannot be set would leave verification without
                // a name to check, accepting any trusted certificate: refuse.
                let named = Self.isIPAddress(serverName)
                    ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1
                    : apns_relay_ssl_set_sni_hostname(ssl, serverName) == 1 && SSL_set1_host(ssl, serverName) == 1
                guard named else {
                    // Freed here: self is not initialized yet, so deinit will not run.
                    SSL_free(ssl)
                    throw HTTP2Error(.tls, "cannot verify against the name \(serverName): \(TLSContext.openSSLErrors())")
                }
            }
        } else {
            SSL_set_accept_state(ssl)
        }
        self.ssl = ssl
        isClient = client
    }

    deinit { SSL_free(ssl) }

    /// Advances the handshake.
    func handshake() throws(HTTP2Error) -> Progress {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        default:
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK {
                throw HTTP2Error(.tls, "certificate verification failed: \(String(cString: X509_verify_cert_error_string(verify)))")
            }
            // A server that speaks ALPN but none of our protocols ends the
            // handshake with a no_application_protocol alert (RFC 7301 §3.2):
            // that is "no HTTP/2 here", not a broken TLS set-up.
            if ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL {
                throw HTTP2Error(.noHTTP2, "the server refused every ALPN protocol we offered (h2): \(TLSContext.openSSLErrors())")
            }
            throw HTTP2Error(.tls, "TLS handshake failed: \(TLSContext.openSSLErrors())")
        }
    }

    /// The ALPN protocol both sides agreed on, if any.
    var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The client's certificate, when it sent one and it verified against
    /// the context's client CA (``TLSServerConfiguration/clientCAFile``);
    /// nil otherwise. Read once the handshake is done.
    func peerCertificate() -> ClientCertificate? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        guard SSL_get_verify_result(ssl) == X509_V_OK else { return nil }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard X509_digest(certificate, EVP_sha256(), &digest, &length) == 1 else { return nil }
        var subject = [CChar](repeating: 0, count: 512)
        _ = X509_NAME_oneline(X509_get_subject_name(certificate), &subject, Int32(subject.count))
        let hex = digest.prefix(Int(length)).map { byte in
            let text = String(byte, radix: 16)
            return byte < 16 ? "0" + text : text
        }.joined()
        return ClientCertificate(
            sha256: hex, subject: String(decoding: subject.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        ERR_clear_error()
        let result = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
        if result > 0 {
            lastReadBlocked = false
            return .bytes(Int(result))
        }
        let outcome = classify(result)
        if case .wouldBlock = outcome { lastReadBlocked = true }
        return outcome
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> IOResult {
        ERR_clear_error()
        let result = SSL_write(ssl, bytes.baseAddress, Int32(bytes.count))
        if result > 0 { return .bytes(Int(result)) }
        return classify(result)
    }

    /// Bytes buffered inside OpenSSL, readable without polling: decrypted
    /// ones, or (every context reads ahead) whole records taken from the socket with
    /// others, such as the server's first frames read along with the end of
    /// the handshake. After a read that wanted more, what is buffered is a
    /// partial record: poll() then, or the loop would spin until it completes.
    var hasPendingBytes: Bool {
        SSL_pending(ssl) > 0 || (!lastReadBlocked && SSL_has_pending(ssl) == 1)
    }

    private func classify(_ result: Int32) -> IOResult {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .wouldBlock(wantsWrite: false)
        case SSL_ERROR_WANT_WRITE: return .wouldBlock(wantsWrite: true)
        case SSL_ERROR_ZERO_RETURN: return .closed
        case SSL_ERROR_SYSCALL:
            let code = errno
            return code == 0 ? .closed : .failed(String(cString: strerror(code)))
        default: return .failed(TLSContext.openSSLErrors())
        }
    }

    /// Sends close_notify; best effort on a non-blocking socket.
    func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
    }

    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}
