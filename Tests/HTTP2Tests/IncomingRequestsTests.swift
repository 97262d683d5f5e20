@testable import HTTP2
import RelayBasics
import Testing

/// A server connection's requests as they arrive, on their own: no thread,
/// socket or session. nghttp2 interleaves streams' frames; the limits turn
/// a request into a refusal as soon as it breaks one, and the request time
/// limit drops requests that never finish.
@Suite("Server connection: incoming requests")
struct IncomingRequestsTests {
    static func data(_ requests: inout IncomingRequests, _ stream: Int32, _ text: String) {
        Array(text.utf8).withUnsafeBytes { requests.data(stream, bytes: $0) }
    }

    static func head(_ requests: inout IncomingRequests, _ stream: Int32, path: String, at now: UInt64 = 0) {
        requests.began(stream, at: now)
        requests.header(stream, name: ":method", value: "POST")
        requests.header(stream, name: ":path", value: path)
        requests.header(stream, name: ":authority", value: "api.push.apple.com")
        requests.header(stream, name: "apns-topic", value: "com.example.app")
    }

    @Test("interleaved streams keep their own pseudo-headers, headers and bodies, and each ends once")
    func interleaved() throws {
        var requests = IncomingRequests(maxHeaderListBytes: nil, maxRequestBodyBytes: nil)
        Self.head(&requests, 1, path: "/3/device/a")
        Self.head(&requests, 3, path: "/3/device/b")
        Self.data(&requests, 1, "{\"aps\":")
        Self.data(&requests, 3, "{\"b\":1}")
        Self.data(&requests, 1, "{}}")
        let ended = requests.end(1)
        let first = try #require(ended)
        #expect(first.method == "POST" && first.path == "/3/device/a" && first.authority == "api.push.apple.com")
        #expect(first.headers == [HTTPHeader("apns-topic", "com.example.app")])
        #expect(String(decoding: first.body, as: UTF8.self) == "{\"aps\":{}}")
        let again = requests.end(1)
        #expect(again == nil, "a stream ends once")
        let endedSecond = requests.end(3)
        let second = try #require(endedSecond)
        #expect(second.path == "/3/device/b")
        #expect(String(decoding: second.body, as: UTF8.self) == "{\"b\":1}")
        #expect(requests.isEmpty)
    }

    @Test("past the header list limit the request is refused 431, counting 32 bytes a header as HTTP/2 does, and keeps no more headers")
    func headerListLimit() throws {
        // `:method GET` counts 42 bytes, each `x-? n` 36: the third of those passes 120.
        var requests = IncomingRequests(maxHeaderListBytes: 120, maxRequestBodyBytes: nil)
        requests.began(1, at: 0)
        requests.header(1, name: ":method", value: "GET")
        requests.header(1, name: "x-a", value: "1")
        requests.header(1, name: "x-b", value: "2")
        requests.header(1, name: "x-c", value: "3")
        let ended = requests.end(1)
        let request = try #require(ended)
        #expect(request.refusedWith == 431)
        #expect(request.headers.map(\.name) == ["x-a", "x-b"])
    }

    @Test("past the body limit the request is refused 413 and its body dropped, the rest ignored as it comes")
    func bodyLimit() throws {
        var requests = IncomingRequests(maxHeaderListBytes: nil, maxRequestBodyBytes: 8)
        Self.head(&requests, 1, path: "/3/device/a")
        Self.data(&requests, 1, "12345")
        Self.data(&requests, 1, "6789")
        Self.data(&requests, 1, "0")
        let ended = requests.end(1)
        let request = try #require(ended)
        #expect(request.refusedWith == 413)
        #expect(request.body.isEmpty)
    }

    @Test("a closed or reset stream's request is dropped, and its later frames are ignored")
    func closed() {
        var requests = IncomingRequests(maxHeaderListBytes: nil, maxRequestBodyBytes: nil)
        Self.head(&requests, 1, path: "/a")
        Self.head(&requests, 3, path: "/b")
        requests.close(1)
        Self.data(&requests, 1, "late")
        let first = requests.end(1)
        #expect(first == nil)
        requests.close(3)
        let second = requests.end(3)
        #expect(second == nil)
        #expect(requests.isEmpty)
    }

    @Test("the request time limit drops only requests begun before it, current or parked, and names each stream once")
    func overdue() throws {
        var requests = IncomingRequests(maxHeaderListBytes: nil, maxRequestBodyBytes: nil)
        Self.head(&requests, 1, path: "/old", at: 10)
        Self.head(&requests, 3, path: "/new", at: 50)
        Self.head(&requests, 5, path: "/older", at: 5)
        var reset: [Int32] = []
        requests.removeBegun(before: 20) { reset.append($0) }
        #expect(reset.sorted() == [1, 5])
        let dropped = [requests.end(1), requests.end(5)]
        #expect(dropped == [nil, nil])
        let ended = requests.end(3)
        let kept = try #require(ended)
        #expect(kept.path == "/new")
    }
}

extension IncomingRequests.Request: Equatable {
    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.method == rhs.method && lhs.path == rhs.path && lhs.authority == rhs.authority && lhs.headers == rhs.headers
            && lhs.body == rhs.body && lhs.refusedWith == rhs.refusedWith && lhs.began == rhs.began
    }
}
