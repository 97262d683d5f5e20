import RelayBasics

/// Maps method and path to a handler. Patterns are literal segments and
/// `{name}` parameters: `/v1/channels/{id}`, `/3/device/{token}`; a last
/// `{name...}` takes the rest of the path.
public struct Router: Sendable {
    private struct Route: Sendable {
        var method: String
        var segments: [Substring]
        var handler: HTTPHandler
    }

    private var routes: [Route] = []

    public init() {}

    /// Adds a route; earlier routes win on overlap.
    public mutating func add(_ method: String, _ pattern: String, _ handler: @escaping HTTPHandler) {
        routes.append(Route(method: method.uppercased(), segments: Self.segments(pattern), handler: handler))
    }

    /// The handler for a request: 404 when no path matches, 405 (with Allow)
    /// when the path matches under other methods.
    public func handler(for request: HTTPRequest) -> (HTTPHandler, [String: String]) {
        let segments = Self.segments(request.path)
        var allowed: [String] = []
        for route in routes {
            guard let parameters = Self.match(route.segments, segments, rawPath: request.path) else { continue }
            if route.method == request.method { return (route.handler, parameters) }
            allowed.append(route.method)
        }
        if !allowed.isEmpty {
            let allow = allowed.joined(separator: ", ")
            return ({ _ in .json(405, Array(#"{"error":{"type":"MethodNotAllowed","message":"use \#(allow)"}}"#.utf8), headers: [HTTPHeader("allow", allow)]) }, [:])
        }
        return ({ request in .json(404, Array(#"{"error":{"type":"NotFound","message":"no route for this path"}}"#.utf8)) }, [:])
    }

    private static func segments(_ path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: true)
    }

    private static func match(_ pattern: [Substring], _ path: [Substring], rawPath: String) -> [String: String]? {
        // A last segment `{name...}` takes the rest of the raw path, slashes
        // (even doubled or leading ones) and all: APNs channel ids are base64
        // and may contain "/", which arrives unescaped however the client
        // encoded it. The segments before it must be literal.
        if let last = pattern.last, last.hasPrefix("{"), last.hasSuffix("...}") {
            let prefix = "/" + pattern.dropLast().joined(separator: "/") + "/"
            guard rawPath.hasPrefix(prefix), rawPath.count > prefix.count else { return nil }
            return [String(last.dropFirst().dropLast(4)): String(rawPath.dropFirst(prefix.count))]
        }
        guard pattern.count == path.count else { return nil }
        var parameters: [String: String] = [:]
        for (expected, actual) in zip(pattern, path) {
            if expected.hasPrefix("{"), expected.hasSuffix("}") {
                parameters[String(expected.dropFirst().dropLast())] = String(actual)
            } else if expected != actual {
                return nil
            }
        }
        return parameters
    }
}
