/// How a client connection secures itself. The defaults are production's:
/// TLS 1.2 or newer, ALPN `h2` required, the system trust store, and the
/// certificate checked against the host name.
public struct TLSClientConfiguration: Sendable, Hashable {
    /// A PEM bundle to trust instead of the system store. For tests against a
    /// local server only; production never sets it.
    public var caFile: String?
    /// The name sent in SNI and checked against the certificate; defaults to
    /// the origin's host (an IP address is checked against the IP SANs).
    public var serverName: String?
    /// The ALPN protocols offered: `h2` for APNs; `http/1.1` for the OTLP
    /// exporter's collector (``TLSClientSession``).
    public var alpnProtocols: [String] = ["h2"]

    public init(caFile: String? = nil, serverName: String? = nil) {
        self.caFile = caFile
        self.serverName = serverName
    }
}

/// A server's certificate and key (PEM files).
public struct TLSServerConfiguration: Sendable, Hashable {
    public var certificateChainFile: String
    public var privateKeyFile: String
    /// Offer HTTP/2 in ALPN. Off only to test clients against a server without h2.
    public var offerHTTP2 = true
    /// A PEM bundle of CAs whose client certificates the server accepts. When
    /// set, the server asks each client for a certificate; one that does not
    /// verify fails the handshake, and none at all is allowed (the request's
    /// ``HTTP2ServerRequest/clientCertificate`` is then nil).
    public var clientCAFile: String?

    public init(certificateChainFile: String, privateKeyFile: String) {
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
    }
}
