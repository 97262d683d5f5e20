import Foundation
@testable import HTTP2
import Testing
import RelayBasics

/// A peer's answer cannot grow the client's memory without bound: past
/// `maximumResponseBodyBytes` of body or `maximumResponseHeaders` header
/// fields, the stream is reset (CANCEL) and its request fails with a
/// `.proto` error that says why; the connection serves the next request.
@Suite("HTTP/2 client: oversized answers are refused")
struct OversizedResponseTests {
    /// Answers /body/N with N bytes and /headers/N with N extra header fields.
    static let handler: HTTP2ServerHandler = { request, responder in
        let parts = request.path.split(separator: "/")
        let count = parts.count == 2 ? Int(parts[1]) ?? 0 : 0
        switch parts.first {
        case "body": responder.respond(HTTP2Response(status: 200, body: [UInt8](repeating: 0x61, count: count)))
        case "headers": responder.respond(HTTP2Response(status: 200, headers: (0..<count).map { HTTPHeader("x-h\($0)", "v") }, body: []))
        default: responder.respond(HTTP2Response(status: 200, body: Array(request.path.utf8)))
        }
    }

    @Test("a body over the limit fails the request with .proto and resets the stream; one at the limit passes")
    func bodyLimit() async throws {
        let resets = ResetLog()
        let local = try LocalServer(resets: resets, handler: Self.handler)
        defer { local.stop() }
        let connection = local.connection { $0.maximumResponseBodyBytes = 64 * 1024 }
        let atLimit = try await connection.send(HTTP2Request(method: "GET", path: "/body/65536"))
        #expect(atLimit.body.count == 65536)
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/body/300000"))
        } throws: { error in
            guard let error = error as? HTTP2Error else { return false }
            return error.code == .proto && error.message.contains("a response body over 65536 bytes")
        }
        await waitUntil("the server sees the stream reset") { !resets.all.isEmpty }
        #expect(resets.all.map(\.code) == [cancelCode])
        #expect(try await connection.send(HTTP2Request(method: "GET", path: "/after")).body == Array("/after".utf8))
        await connection.close()
    }

    @Test("more header fields than the limit fail the request with .proto; the limit itself passes")
    func headerLimit() async throws {
        let local = try LocalServer(handler: Self.handler)
        defer { local.stop() }
        let connection = local.connection { $0.maximumResponseHeaders = 20 }
        #expect(try await connection.send(HTTP2Request(method: "GET", path: "/headers/20")).headers.count == 20)
        await #expect {
            try await connection.send(HTTP2Request(method: "GET", path: "/headers/500"))
        } throws: { error in
            guard let error = error as? HTTP2Error else { return false }
            return error.code == .proto && error.message.contains("more than 20 header fields")
        }
        #expect(try await connection.send(HTTP2Request(method: "GET", path: "/after")).status == 200)
        await connection.close()
    }
}
