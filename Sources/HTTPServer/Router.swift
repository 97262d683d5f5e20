import RelayBasics

/// Maps method and path to a handler. Patterns are literal segments and
/// `{name}` parameters: `/v1/channels/{id}`, `/3/device/{token}`; a last
/// `{name...}` takes the rest of the path.
///
/// The server calls ``respond(to:errors:)`` for every request it reads, on
/// Swift's concurrency pool (never on a libmicrohttpd thread). The handler
/// gets the matched pattern in ``HTTPRequest/route`` (for span names and
/// metric labels, so nothing matches the path twice) and the parameters in
/// ``HTTPRequest/pathParameters``.
public struct Router: Sendable {
    private struct Route: Sendable {
        var method: String
        var segments: [Substring]
        /// The pattern as handlers see it: `{name...}` written `{name}`.
        var label: String
        var handler: HTTPHandler
    }

    /// What a request's method and path match.
    public enum Lookup: Sendable {
        /// A route: its handler, its pattern (as ``HTTPRequest/route`` holds it) and the path parameters.
        case found(HTTPHandler, route: String, parameters: [String: String])
        /// The path matches under other methods only; `allow` lists them in the order they were added.
        case methodNotAllowed(allow: [String])
        case notFound
    }

    private var routes: [Route] = []
    /// For each literal pattern's path as written (`/v1/send`): every route
    /// that matches exactly that path, in order, with its parameters. A
    /// request for one of these paths (nearly every request) is answered
    /// from here with one dictionary lookup instead of matching each route;
    /// any other spelling of a path takes the full match.
    private var literalPaths: [String: [(route: Int, parameters: [String: String])]] = [:]

    public init() {}

    /// Adds a route; earlier routes win on overlap.
    public mutating func add(_ method: String, _ pattern: String, _ handler: @escaping HTTPHandler) {
        routes.append(Route(
            method: method.uppercased(), segments: Self.segments(pattern), label: Self.label(pattern), handler: handler))
        // Routes are added once, at start-up: the table is rebuilt whole, so
        // a later route that also matches an earlier literal path is in its list.
        var paths = literalPaths.keys.map { $0 }
        if !pattern.contains("{") { paths.append(pattern) }
        literalPaths = [:]
        for path in paths {
            let segments = Self.segments(path)
            literalPaths[path] = routes.indices.compactMap { index in
                Self.match(routes[index].segments, segments, rawPath: path).map { (index, $0) }
            }
        }
    }

    /// The route for `method` and `path`.
    public func lookup(_ method: String, _ path: String) -> Lookup {
        if let matches = literalPaths[path] { return Self.lookup(method, in: matches.lazy.map { (self.routes[$0.route], $0.parameters) }) }
        let segments = Self.segments(path)
        return Self.lookup(method, in: routes.lazy.compactMap { route in
            Self.match(route.segments, segments, rawPath: path).map { (route, $0) }
        })
    }

    /// The first of `matches` (the routes whose pattern matches, in order) for `method`, else the methods they allow.
    private static func lookup<Matches: Sequence<(Route, [String: String])>>(_ method: String, in matches: Matches) -> Lookup {
        var allowed: [String] = []
        for (route, parameters) in matches {
            if route.method == method { return .found(route.handler, route: route.label, parameters: parameters) }
            allowed.append(route.method)
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allow: allowed)
    }

    /// Routes `request` and runs its handler: 404 `NotFound` when no path
    /// matches, 405 `MethodNotAllowed` (with `allow`) when the path matches
    /// under other methods, both worded by `errors` (the server's configured
    /// ``HTTPServer/Configuration/errorRenderer``).
    public func respond(to request: HTTPRequest, errors: HTTPServer.ErrorRenderer = HTTPServer.jsonErrorEnvelope) async -> HTTPResponse {
        switch lookup(request.method, request.path) {
        case .found(let handler, let route, let parameters):
            var request = request
            request.route = route
            request.pathParameters = parameters
            return await handler(request)
        case .methodNotAllowed(let allowed):
            let allow = allowed.joined(separator: ", ")
            var response = errors(405, .methodNotAllowed, "use \(allow)", nil)
            response.headers.append(HTTPHeader("allow", allow))
            return response
        case .notFound:
            return errors(404, .notFound, "no route for this path", nil)
        }
    }

    private static func segments(_ path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: true)
    }

    /// `/v1/channels/{channelId...}` → `/v1/channels/{channelId}`.
    private static func label(_ pattern: String) -> String {
        pattern.hasSuffix("...}") ? String(pattern.dropLast(4)) + "}" : pattern
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
