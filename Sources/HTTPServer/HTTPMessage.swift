public import RelayBasics

/// A request the server received, fully read.
public struct HTTPRequest: Sendable {
    public var method: String
    /// The path without the query string, e.g. `/v1/send`.
    public var path: String
    /// Decoded query parameters; a repeated name keeps its last value.
    public var query: [String: String]
    /// Headers with lowercase names, in arrival order.
    public var headers: [HTTPHeader]
    /// Header values that are not UTF-8, byte for byte, by lowercase name
    /// (their entry in `headers` reads each bad sequence as U+FFFD), so a
    /// check can name the byte the client sent; empty for nearly every request.
    public var undecodedHeaderValues: [String: [UInt8]] = [:]
    public var body: [UInt8]
    /// Path parameters filled in by the router (`/v1/channels/{id}` → `id`).
    public var pathParameters: [String: String] = [:]
    /// The pattern the router matched (`/v1/channels/{channelId}`; a greedy
    /// `{name...}` is written `{name}`), for span attributes and metric
    /// labels; nil before routing.
    public var route: String?
    /// The client's TLS certificate, verified by the server against its
    /// client CA (the HTTP/2 APNs ingress with `apns_ingress.client_ca_file`);
    /// nil everywhere else. Set by the server, never from a header.
    public var clientCertificate: ClientCertificate?
    /// Set by the server: reports whether the client is gone.
    var clientProbe: (@Sendable () -> Bool)?

    /// Whether the client has hung up (closed or reset its connection), or the
    /// server has already answered this request for the handler (a drain past
    /// its timeout). Nobody reads what the handler returns after that, so long
    /// handlers check it before starting more work. Checked when read, without
    /// blocking; false for requests not built by ``HTTPServer``.
    public var isClientGone: Bool { clientProbe?() ?? false }

    public init(method: String, path: String, query: [String: String] = [:], headers: [HTTPHeader] = [], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? { headers.value(of: name) }
}

/// A response to send.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// Whether the server may gzip the body for clients that accept it.
    public var compressible: Bool

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = [], compressible: Bool = true) {
        self.status = status
        self.headers = headers
        self.body = body
        self.compressible = compressible
    }

    /// A plain-text response.
    public static func text(_ status: Int, _ text: String, headers: [HTTPHeader] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [HTTPHeader("content-type", "text/plain; charset=utf-8")] + headers, body: Array(text.utf8))
    }

    /// A JSON response from already-encoded bytes.
    public static func json(_ status: Int, _ body: [UInt8], headers: [HTTPHeader] = []) -> HTTPResponse {
        // One array, with room for the `traceparent` the ingress adds to every answer.
        var all: [HTTPHeader] = []
        all.reserveCapacity(headers.count + 2)
        all.append(HTTPHeader("content-type", "application/json"))
        all.append(contentsOf: headers)
        return HTTPResponse(status: status, headers: all, body: body)
    }
}

/// Handles one request. Runs on Swift's concurrency pool, never on a
/// libmicrohttpd thread, so it may await anything.
public typealias HTTPHandler = @Sendable (HTTPRequest) async -> HTTPResponse
