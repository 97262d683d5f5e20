import HTTPServer
import Testing

@Suite("Router")
struct RouterTests {
    static func router() -> Router {
        var router = Router()
        router.add("DELETE", "/v1/channels/{channelId...}") { request in .text(200, request.pathParameters["channelId"] ?? "-") }
        router.add("POST", "/3/device/{token}") { request in .text(200, request.pathParameters["token"] ?? "-") }
        return router
    }

    static func route(_ method: String, _ path: String) async -> HTTPResponse {
        var request = HTTPRequest(method: method, path: path)
        let (handler, parameters) = router().handler(for: request)
        request.pathParameters = parameters
        return await handler(request)
    }

    @Test("a trailing {name...} keeps every byte of the rest of the path: base64 slashes, doubled and leading ones",
          arguments: ["abc", "ab/cd+ef==", "/leading", "double//slash", "trailing/"])
    func greedy(_ channelID: String) async {
        let response = await Self.route("DELETE", "/v1/channels/\(channelID)")
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == channelID)
    }

    @Test("plain parameters match one segment; other methods get 405 with Allow; unknown paths 404")
    func plain() async {
        #expect(String(decoding: await Self.route("POST", "/3/device/abcd").body, as: UTF8.self) == "abcd")
        #expect(await Self.route("POST", "/3/device/ab/cd").status == 404)
        let wrongMethod = await Self.route("GET", "/3/device/abcd")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.headers.contains { $0.name == "allow" && $0.value == "POST" })
        #expect(await Self.route("DELETE", "/v1/channels/").status == 404)
    }
}
