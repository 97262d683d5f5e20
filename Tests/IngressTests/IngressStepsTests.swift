import APNs
import HTTPServer
import RelayBasics
@testable import Ingress
import Logging
import Synchronization
import Telemetry
import Testing

/// The ingress' steps without a server or a relay behind them: a stub handler
/// at the end of the declared chain, requests built in memory.
@Suite("Ingress steps")
struct IngressStepsTests {
    /// The key `secret-a` (rate 1/s, burst 1) and `secret-b` (no limit).
    static let keyring = APIKeyring(keys: [
        APIKey(name: "a", sha256Hex: sha256Hex("secret-a"), apps: nil, ratePerSecond: 1, burst: 1)!,
        APIKey(name: "b", sha256Hex: sha256Hex("secret-b"), apps: nil)!,
    ])

    static func sha256Hex(_ text: String) -> String {
        APIKeyring.bytesOfSHA256(text).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    /// Seen by the observer and the stub handler.
    final class Record: Sendable {
        let observed = Mutex<[(route: String, status: Int)]>([])
        let handled = Mutex<[String?]>([])
        let waitedForAudit = Mutex(0)
    }

    static func steps(_ record: Record, maximumConcurrentRequests: Int = 8) -> IngressSteps {
        IngressSteps(
            observer: { route, status, _ in record.observed.withLock { $0.append((route, status)) } },
            tracer: JSONSpanTracer(logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })),
            waitUntilRecorded: { record.waitedForAudit.withLock { $0 += 1 } },
            maximumConcurrentRequests: maximumConcurrentRequests, keyring: keyring, limiter: RateLimiter())
    }

    /// The stub handler: 200 naming the caller, or `error` when given.
    static func handler(_ steps: IngressSteps, _ record: Record, access: Ingress.Access = .apiKey, error: IngressError? = nil) -> HTTPHandler {
        steps.handler(access) { _, context throws(IngressError) in
            record.handled.withLock { $0.append(context.key?.name) }
            if let error { throw error }
            return .text(200, "caller \(context.key?.name ?? "-")")
        }
    }

    static func request(key: String?, traceparent: String? = nil) -> HTTPRequest {
        var headers: [HTTPHeader] = []
        if let key { headers.append(HTTPHeader("authorization", "Bearer \(key)")) }
        if let traceparent { headers.append(HTTPHeader("traceparent", traceparent)) }
        var request = HTTPRequest(method: "POST", path: "/v1/send", headers: headers)
        request.route = "/v1/send"
        return request
    }

    static func body(_ response: HTTPResponse) -> String { String(decoding: response.body, as: UTF8.self) }
    static func header(_ response: HTTPResponse, _ name: String) -> String? { response.headers.first { $0.name == name }?.value }

    @Test("the declared order: metrics, span, error rendering, drain, concurrency, authentication, rate limit; probes only metrics and errors")
    func declaredOrder() {
        let steps = Self.steps(Record())
        #expect(steps.chain(for: .apiKey).map { "\(type(of: $0))" } == [
            "RequestMetrics", "RequestSpan", "ErrorRendering", "DrainGate", "ConcurrencyCap", "Authentication", "RateLimit",
        ])
        #expect(steps.chain(for: .open).map { "\(type(of: $0))" } == ["RequestMetrics", "ErrorRendering"])
    }

    @Test("draining is refused before authentication: 503 Draining with retry-after even without a key; counted, traced, handler not run")
    func drainBeforeAuthentication() async {
        let record = Record()
        let steps = Self.steps(record)
        steps.drain.close()
        let response = await Self.handler(steps, record)(Self.request(key: nil))
        #expect(response.status == 503)
        #expect(Self.body(response) == #"{"error":{"type":"Draining","message":"this relay instance is shutting down; retry on another"}}"#)
        #expect(Self.header(response, "retry-after") == "1")
        #expect(Self.header(response, "www-authenticate") == nil)
        #expect(Self.header(response, "traceparent") != nil, "the span step is outside the refusal")
        #expect(record.handled.withLock { $0 }.isEmpty)
        #expect(record.observed.withLock { $0.map(\.status) } == [503])
        // A probe passes no drain step: it answers, so /readyz can say why.
        #expect(await Self.handler(steps, record, access: .open)(Self.request(key: nil)).status == 200)
    }

    @Test("the concurrency cap is checked before authentication: 503 Overloaded without a key")
    func concurrencyBeforeAuthentication() async {
        let record = Record()
        let response = await Self.handler(Self.steps(record, maximumConcurrentRequests: 0), record)(Self.request(key: nil))
        #expect(response.status == 503)
        #expect(Self.body(response) == #"{"error":{"type":"Overloaded","message":"more than 0 requests in progress"}}"#)
        #expect(Self.header(response, "retry-after") == "1")
    }

    @Test("authentication before the rate limit: unknown keys are 401 and spend no key's tokens; the key's second request in a second is 429")
    func authenticationBeforeRateLimit() async {
        let record = Record()
        let steps = Self.steps(record)
        let handler = Self.handler(steps, record)
        for key in [nil, "secret-wrong", "secret-a-not"] {
            let refused = await handler(Self.request(key: key))
            #expect(refused.status == 401)
            #expect(Self.body(refused) == #"{"error":{"type":"Unauthorized","message":"send an API key as 'Authorization: Bearer <key>'"}}"#)
            #expect(Self.header(refused, "www-authenticate") == #"Bearer realm="apns-relay""#)
        }
        let first = await handler(Self.request(key: "secret-a"))
        #expect(first.status == 200, "the 401s spent none of key a's burst of 1")
        #expect(Self.body(first) == "caller a", "the handler gets the authenticated key")
        let second = await handler(Self.request(key: "secret-a"))
        #expect(second.status == 429)
        #expect(Self.body(second) == #"{"error":{"type":"RateLimited","message":"API key a is over its 1.0 requests/s limit"}}"#)
        #expect(Self.header(second, "retry-after") == "1")
        #expect(await handler(Self.request(key: "secret-b")).status == 200, "buckets are per key; b has no limit")
        #expect(record.handled.withLock { $0 } == ["a", "b"])
        #expect(record.observed.withLock { $0.map(\.status) } == [401, 401, 401, 200, 429, 200])
        #expect(record.observed.withLock { $0.allSatisfy { $0.route == "/v1/send" } }, "the metrics label is the router's pattern")
    }

    @Test("error rendering: a handler's IngressError becomes its envelope and headers, then the traceparent; a recorded refusal waits for the audit first")
    func errorRendering() async throws {
        let record = Record()
        let steps = Self.steps(record)
        var error = IngressError(status: 400, type: .invalidSnapshot, message: "snapshot.kind: must be a string", field: "snapshot.kind")
        let apnsID = try #require(APNsID("1B6B2A4E-3C2D-4E5F-8A9B-0C1D2E3F4A5B"))
        error.apnsID = apnsID
        error.attempts = 0
        let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
        let response = await Self.handler(steps, record, error: error)(
            Self.request(key: "secret-b", traceparent: "00-\(traceID)-00f067aa0ba902b7-01"))
        #expect(response.status == 400)
        #expect(Self.body(response) == #"{"error":{"type":"InvalidSnapshot","message":"snapshot.kind: must be a string","field":"snapshot.kind","apnsId":"\#(apnsID)","attempts":0}}"#)
        #expect(response.headers.map(\.name) == ["content-type", "apns-id", "traceparent"])
        let traceparent = try #require(Self.header(response, "traceparent"))
        #expect(traceparent.hasPrefix("00-\(traceID)-"), "the request span is the caller's child: \(traceparent)")
        #expect(record.waitedForAudit.withLock { $0 } == 1, "an answered refusal with an audit row waits until the row is durable")

        var notRecorded = IngressError(status: 502, type: .upstream, message: "APNs could not be reached: closed")
        notRecorded.retryAfter = 3
        let upstream = await Self.handler(steps, record, error: notRecorded)(Self.request(key: "secret-b"))
        #expect(upstream.status == 502)
        #expect(Self.header(upstream, "retry-after") == "3")
        #expect(record.waitedForAudit.withLock { $0 } == 1)
    }

    @Test("the server's own refusals and the router's 404/405 come in the ingress envelope, byte for byte as before")
    func serverErrors() async {
        let renderer = IngressError.serverErrorRenderer
        let tooLarge = renderer(413, .payloadTooLarge, "request body is over the 10-byte limit", nil)
        #expect(Self.body(tooLarge) == #"{"error":{"type":"PayloadTooLarge","message":"request body is over the 10-byte limit"}}"#)
        let badHeader = renderer(400, .invalidRequest, "a \"quoted\" control", "x-h")
        #expect(Self.body(badHeader) == #"{"error":{"type":"InvalidRequest","message":"a \"quoted\" control","field":"x-h"}}"#)
        #expect(badHeader.headers.map(\.name) == ["content-type"])
        // The same bytes as HTTPServer's own envelope, which the metrics listener uses.
        for (status, type, message, field) in [(404, HTTPRefusalType.notFound, "no route for this path", String?.none), (400, .invalidRequest, "tab\there", "path")] {
            #expect(renderer(status, type, message, field).body == HTTPServer.jsonErrorEnvelope(status, type, message, field).body)
        }
    }

    @Test("every refusal the HTTP server can give maps to an ingress code of the same wire name, one of the documented set")
    func serverRefusalsAreCodes() {
        for refusal in HTTPRefusalType.allCases {
            let code = IngressError.Code(refusal)
            #expect(code.rawValue == refusal.rawValue)
            #expect(IngressError.Code.all.contains(code), "\(refusal)")
        }
    }
}
