import Foundation
import HTTPServer
@testable import Ingress
import Testing

/// The ingress' route table, read without building an ingress: every route
/// is a row of ``Ingress/routes``.
@Suite("Ingress route table")
struct RouteTableTests {
    /// A router over the real table whose handlers echo what they were given.
    static let router: Router = {
        var router = Router()
        for route in Ingress.routes {
            router.add(route.method, route.pattern) { request in
                let parameters = request.pathParameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&")
                return .text(200, "\(route.access) \(request.route ?? "-") \(parameters)")
            }
        }
        return router
    }()

    static func answer(_ method: String, _ path: String) async -> (Int, String, HTTPResponse) {
        let response = await router.respond(to: HTTPRequest(method: method, path: path), errors: IngressError.serverErrorRenderer)
        return (response.status, String(decoding: response.body, as: UTF8.self), response)
    }

    @Test("each route is declared once; only the probes go without a key")
    func declaredOnce() {
        let keys = Ingress.routes.map { "\($0.method) \($0.pattern)" }
        #expect(Set(keys).count == keys.count, "\(keys)")
        #expect(Ingress.routes.filter { if case .open = $0.access { true } else { false } }.map(\.pattern) == ["/healthz", "/readyz"])
        #expect(keys.contains("DELETE /v1/channels/{channelId...}"))
    }

    @Test("lookups hand the pattern and the path parameters to the handler", arguments: [
        ("POST", "/v1/send", "apiKey /v1/send "),
        ("POST", "/v1/send/batch", "apiKey /v1/send/batch "),
        ("GET", "/v1/channels", "apiKey /v1/channels "),
        ("DELETE", "/v1/channels/dGVzdA/+x==", "apiKey /v1/channels/{channelId} channelId=dGVzdA/+x=="),
        ("GET", "/v1/channels/dGVzdA/+x==", "apiKey /v1/channels/{channelId} channelId=dGVzdA/+x=="),
        ("POST", "/3/device/abcd", "apiKey /3/device/{token} token=abcd"),
        ("PUT", "/v1/admin/retry", "apiKey /v1/admin/retry "),
        ("GET", "/healthz", "open /healthz "),
        ("GET", "/readyz", "open /readyz "),
    ])
    func lookup(_ method: String, _ path: String, _ expected: String) async {
        let (status, body, _) = await Self.answer(method, path)
        #expect(status == 200)
        #expect(body == expected)
    }

    @Test("a path under other methods is 405 with Allow listing them in table order; an unknown path is 404; both in the ingress envelope")
    func notFoundAndMethodNotAllowed() async {
        let (status, body, response) = await Self.answer("PUT", "/v1/channels")
        #expect(status == 405)
        #expect(body == #"{"error":{"type":"MethodNotAllowed","message":"use POST, GET"}}"#)
        #expect(response.headers.map(\.name) == ["content-type", "allow"])
        #expect(response.headers.last?.value == "POST, GET")
        #expect(await Self.answer("GET", "/v1/send").1 == #"{"error":{"type":"MethodNotAllowed","message":"use POST"}}"#)
        let (missing, missingBody, _) = await Self.answer("GET", "/v1/nothing")
        #expect(missing == 404)
        #expect(missingBody == #"{"error":{"type":"NotFound","message":"no route for this path"}}"#)
        #expect(await Self.answer("POST", "/3/device/a/b").0 == 404, "a plain parameter is one segment")
    }
}

/// The error names against the API reference.
@Suite("Ingress error codes")
struct ErrorCodeTests {
    @Test("IngressError.Code lists exactly the types docs/api.md's error table lists, in its order")
    func codesMatchTheDocs() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/api.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let header = try #require(lines.firstIndex { $0.hasPrefix("| type | status |") }, "docs/api.md has no error type table")
        var documented: [String] = []
        for line in lines[(header + 2)...] {
            guard line.hasPrefix("| `") else { break }
            let name = line.dropFirst(3).prefix { $0 != "`" }
            documented.append(String(name))
        }
        #expect(documented == IngressError.Code.all.map(\.rawValue))
        #expect(Set(IngressError.Code.all).count == IngressError.Code.all.count)
    }
}
