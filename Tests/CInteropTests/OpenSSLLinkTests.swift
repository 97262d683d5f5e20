import COpenSSL
import Testing

@Suite("OpenSSL is linked and usable")
struct OpenSSLLinkTests {
    @Test("the linked library is OpenSSL 3.x")
    func version() {
        let version = String(cString: apns_relay_openssl_version())
        #expect(version.hasPrefix("OpenSSL 3."), "got \(version)")
        // The number agrees with the string: 0xMNN00PP0L, major 3.
        #expect(OpenSSL_version_num() >> 28 == 3)
    }

    @Test("a client context holds TLS 1.2 as its floor, ALPN h2, and SNI on a connection")
    func clientContext() throws {
        let context = try #require(SSL_CTX_new(TLS_client_method()))
        defer { SSL_CTX_free(context) }

        #expect(apns_relay_ssl_ctx_set_min_proto_version(context, TLS1_2_VERSION) == 1)
        // SSL_CTX_get_min_proto_version is a macro over SSL_CTX_ctrl.
        #expect(SSL_CTX_ctrl(context, SSL_CTRL_GET_MIN_PROTO_VERSION, 0, nil) == Int(TLS1_2_VERSION))

        // ALPN wire format: length-prefixed names. Unlike most of OpenSSL,
        // this call returns 0 on success.
        let alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        #expect(SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count)) == 0)

        let connection = try #require(SSL_new(context))
        defer { SSL_free(connection) }
        #expect(apns_relay_ssl_set_sni_hostname(connection, "api.sandbox.push.apple.com") == 1)
        let serverName = try #require(SSL_get_servername(connection, TLSEXT_NAMETYPE_host_name))
        #expect(String(cString: serverName) == "api.sandbox.push.apple.com")
    }
}
