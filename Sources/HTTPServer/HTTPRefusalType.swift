/// The kinds of answer the HTTP server gives on its own (framing, limits,
/// routing, drain, a handler's impossible status), named as the relay's API
/// names them. Closed: a layer above renders each through
/// ``HTTPServer/Configuration/errorRenderer`` and maps it with a switch, so
/// a new kind cannot reach a client without a name there.
public enum HTTPRefusalType: String, Sendable, CaseIterable {
    /// 400: a malformed request head or target.
    case invalidRequest = "InvalidRequest"
    /// 413: a declared or read body over the limit.
    case payloadTooLarge = "PayloadTooLarge"
    /// 501: a transfer coding the server does not read.
    case notImplemented = "NotImplemented"
    /// 404: no route for the path.
    case notFound = "NotFound"
    /// 405: the route exists under other methods.
    case methodNotAllowed = "MethodNotAllowed"
    /// 503: the server stopped before the request finished.
    case draining = "Draining"
    /// 500: a handler answered with a status HTTP cannot carry.
    case `internal` = "Internal"
}
