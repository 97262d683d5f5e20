import HTTPServer
@testable import Ingress
import RelayBasics
import Testing

/// Which requests the HTTP/2 APNs ingress reads as APNs' `POST /3/device/<token>`:
/// the token check scans the path's bytes as a buffer, and must refuse
/// what the UTF8View's `contains("/")` refused.
@Suite("HTTP/2 APNs ingress: the /3/device request")
struct APNsHTTP2RequestTests {
    static let token = String(repeating: "ab", count: 32)

    static func read(_ method: String, _ path: String, headers: [HTTPHeader] = [], keyed: Bool = false) -> HTTPRequest? {
        APNsCompatibleController.apnsHTTP2Request(HTTPRequest(method: method, path: path, headers: headers), environment: nil, keyed: keyed)
    }

    @Test("POST /3/device/<token> is read with its token as the path parameter and the h2 route")
    func device() throws {
        let request = try #require(Self.read("POST", "/3/device/\(Self.token)"))
        #expect(request.pathParameters["token"] == Self.token)
        #expect(request.route == Ingress.apnsHTTP2Route)
    }

    @Test("a token with a slash anywhere, an empty token, another method or path: not a /3/device request")
    func refused() {
        #expect(Self.read("POST", "/3/device/\(Self.token)/more") == nil)
        #expect(Self.read("POST", "/3/device/ab/\(Self.token)") == nil)
        #expect(Self.read("POST", "/3/device//") == nil)
        #expect(Self.read("POST", "/3/device/") == nil)
        #expect(Self.read("GET", "/3/device/\(Self.token)") == nil)
        #expect(Self.read("POST", "/3/devices/\(Self.token)") == nil)
    }

    @Test("a token with non-ASCII text and no slash is left to the send's own token check")
    func nonASCII() throws {
        let request = try #require(Self.read("POST", "/3/device/é\(Self.token)"))
        #expect(request.pathParameters["token"] == "é\(Self.token)")
    }

    @Test("the client's apns-id becomes the idempotency key, lowercased, when the relay keeps keys")
    func apnsID() throws {
        let id = "8A1C3B2E-0F4D-4C11-9E7A-2B5D6F8A9C01"
        let keyed = try #require(Self.read("POST", "/3/device/\(Self.token)", headers: [HTTPHeader("apns-id", id)], keyed: true))
        #expect(keyed.header("idempotency-key") == "apns-id:" + id.lowercased())
        let unkeyed = try #require(Self.read("POST", "/3/device/\(Self.token)", headers: [HTTPHeader("apns-id", id)]))
        #expect(unkeyed.header("idempotency-key") == nil)
    }
}
