import HTTPServer
import Testing

@Suite("Router")
struct RouterTests {
    static func router() -> Router {
        var router = Router()
        router.add("DELETE", "/v1/channels/{channelId...}") { request in
            .text(200, "\(request.route ?? "-") \(request.pathParameters["channelId"] ?? "-")")
        }
        router.add("POST", "/3/device/{token}") { request in .text(200, "\(request.route ?? "-") \(request.pathParameters["token"] ?? "-")") }
        router.add("PUT", "/3/device/{token}") { _ in .text(200, "") }
        return router
    }

    static func route(_ method: String, _ path: String) async -> HTTPResponse {
        await router().respond(to: HTTPRequest(method: method, path: path))
    }

    static func text(_ response: HTTPResponse) -> String { String(decoding: response.body, as: UTF8.self) }

    @Test("a trailing {name...} keeps every byte of the rest of the path: base64 slashes, doubled and leading ones",
          arguments: ["abc", "ab/cd+ef==", "/leading", "double//slash", "trailing/"])
    func greedy(_ channelID: String) async {
        let response = await Self.route("DELETE", "/v1/channels/\(channelID)")
        #expect(response.status == 200)
        #expect(Self.text(response) == "/v1/channels/{channelId} \(channelID)", "the handler gets the pattern, {name...} written {name}")
    }

    @Test("plain parameters match one segment; the handler gets the matched pattern; other methods get 405 with Allow; unknown paths 404")
    func plain() async {
        #expect(Self.text(await Self.route("POST", "/3/device/abcd")) == "/3/device/{token} abcd")
        #expect(await Self.route("POST", "/3/device/ab/cd").status == 404)
        let wrongMethod = await Self.route("GET", "/3/device/abcd")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.headers.map(\.name) == ["content-type", "allow"])
        #expect(wrongMethod.headers.contains { $0.name == "allow" && $0.value == "POST, PUT" })
        #expect(Self.text(wrongMethod) == #"{"error":{"type":"MethodNotAllowed","message":"use POST, PUT"}}"#)
        let unknown = await Self.route("DELETE", "/v1/channels/")
        #expect(unknown.status == 404)
        #expect(Self.text(unknown) == #"{"error":{"type":"NotFound","message":"no route for this path"}}"#)
    }

    @Test("404 and 405 are worded by the error renderer the server is configured with")
    func renderer() async {
        let renderer: HTTPServer.ErrorRenderer = { status, type, message, _ in .text(status, "\(type.rawValue): \(message)") }
        let response = await Self.router().respond(to: HTTPRequest(method: "GET", path: "/3/device/x"), errors: renderer)
        #expect(response.status == 405)
        #expect(Self.text(response) == "MethodNotAllowed: use POST, PUT")
        #expect(response.headers.last?.name == "allow")
        #expect(Self.text(await Self.router().respond(to: HTTPRequest(method: "GET", path: "/x"), errors: renderer)) == "NotFound: no route for this path")
    }

    @Test("lookup: the pattern and parameters of a match, the methods of a path that matches under others")
    func lookup() {
        guard case .found(_, let route, let parameters) = Self.router().lookup("POST", "/3/device/abc") else {
            Issue.record("no match")
            return
        }
        #expect(route == "/3/device/{token}")
        #expect(parameters == ["token": "abc"])
        guard case .methodNotAllowed(let allow) = Self.router().lookup("GET", "/3/device/abc") else {
            Issue.record("not a 405")
            return
        }
        #expect(allow == ["POST", "PUT"])
    }
}

@Suite("Router: literal paths")
struct RouterLiteralPathTests {
    /// A parameter route before literal ones it overlaps, a literal route, and a greedy one.
    static func router() -> Router {
        var router = Router()
        router.add("GET", "/v1/channels/{id}") { _ in .text(200, "") }
        router.add("POST", "/v1/channels/list") { _ in .text(200, "") }
        router.add("GET", "/v1/channels/list") { _ in .text(200, "") }
        router.add("POST", "/v1/send") { _ in .text(200, "") }
        router.add("DELETE", "/v1/{rest...}") { _ in .text(200, "") }
        return router
    }

    static func found(_ lookup: Router.Lookup) -> (route: String, parameters: [String: String])? {
        guard case .found(_, let route, let parameters) = lookup else { return nil }
        return (route, parameters)
    }

    @Test("the first route in the order added wins for a literal path, whatever its kind; later ones count in Allow")
    func order() throws {
        let router = Self.router()
        let get = try #require(Self.found(router.lookup("GET", "/v1/channels/list")))
        #expect(get.route == "/v1/channels/{id}" && get.parameters == ["id": "list"], "the earlier parameter route")
        let post = try #require(Self.found(router.lookup("POST", "/v1/channels/list")))
        #expect(post.route == "/v1/channels/list" && post.parameters.isEmpty)
        let greedy = try #require(Self.found(router.lookup("DELETE", "/v1/channels/list")))
        #expect(greedy.route == "/v1/{rest}" && greedy.parameters == ["rest": "channels/list"], "a later greedy route matches a literal path too")
        guard case .methodNotAllowed(let allow) = router.lookup("PUT", "/v1/channels/list") else {
            Issue.record("not a 405")
            return
        }
        #expect(allow == ["GET", "POST", "GET", "DELETE"])
        guard case .methodNotAllowed(let sendAllow) = router.lookup("GET", "/v1/send") else {
            Issue.record("not a 405")
            return
        }
        #expect(sendAllow == ["POST", "DELETE"])
    }

    @Test("other spellings of a literal path match as before: doubled and trailing slashes")
    func spellings() throws {
        let router = Self.router()
        for path in ["/v1//send", "/v1/send/", "v1/send"] {
            #expect(try #require(Self.found(router.lookup("POST", path))).route == "/v1/send", "\(path)")
        }
        guard case .notFound = router.lookup("POST", "/v2/send") else {
            Issue.record("/v2/send matched")
            return
        }
    }
}
