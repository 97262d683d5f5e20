import APNs
import HTTPServer
import Relay
import RelayJSON

/// What every route reads the same way: a JSON body, a query's app and
/// environment, and no parameter nobody reads.
enum RequestReading {
    /// Parses a JSON body; the error names the line and column.
    ///
    /// `checksContentType: false` is for `/3/device`, where APNs reads the body
    /// as JSON whatever `content-type` says (curl's `-d` sends a form type), and
    /// a script written for Apple must work unchanged.
    static func parseBody(_ request: HTTPRequest, checksContentType: Bool = true) throws(IngressError) -> JSONValue {
        guard !request.body.isEmpty else { throw .invalid("body", "is empty; send a JSON object") }
        if checksContentType, let type = request.header("content-type"), !isJSONMediaType(type) {
            throw IngressError(status: 415, type: .unsupportedMediaType, message: "content-type must be application/json, not \(type)", field: "content-type")
        }
        do {
            return try JSONParser.parse(request.body)
        } catch {
            throw .invalid("body", "\(error)")
        }
    }

    /// Whether a `content-type` is `application/json` in any case, alone or
    /// followed by parameters (`; charset=utf-8`, blanks allowed before the
    /// `;`): `application/jsonfoo` or `application/json-seq` is another type.
    /// Compared byte by byte, without a lowercased copy per request (no other
    /// character lowercases to one of these ASCII letters).
    static func isJSONMediaType(_ type: String) -> Bool {
        let expected = "application/json".utf8
        let bytes = type.utf8
        guard bytes.count >= expected.count else { return false }
        guard zip(bytes, expected).allSatisfy({ byte, wanted in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 == wanted : byte == wanted
        }) else { return false }
        for byte in bytes.dropFirst(expected.count) {
            if byte == UInt8(ascii: ";") { return true }
            guard byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") else { return false }
        }
        return true
    }

    /// Fails on the first query parameter the route does not read.
    static func rejectUnknownParameters(_ query: [String: String], allowed: Set<String>) throws(IngressError) {
        for name in query.keys.sorted() where !allowed.contains(name) {
            throw .invalid(name, "unknown query parameter (allowed: \(allowed.sorted().joined(separator: ", ")))")
        }
    }

    /// `app` and `environment` from a query string, rejecting parameters nobody reads.
    static func appAndEnvironment(query: [String: String], allowed: Set<String>) throws(IngressError) -> (String, Environment) {
        try rejectUnknownParameters(query, allowed: allowed)
        guard let app = query["app"], !app.isEmpty else { throw .invalid("app", "query parameter is required") }
        guard let name = query["environment"], !name.isEmpty else { throw .invalid("environment", "query parameter is required (development or production)") }
        guard let environment = Environment(name: name) else { throw .invalid("environment", "must be development or production") }
        return (app, environment)
    }
}
