import Foundation
import RelayJSON
import Testing

/// Bad input: a clear 4xx naming the field and the rule, and nothing sent to APNs.
@Suite("Ingress bad input")
struct IngressBadInputTests {
    struct Case: Sendable, CustomStringConvertible {
        var name: String
        var path = "/v1/send"
        var body: String
        var status: Int
        var type: String
        var field: String?
        var reason: String?
        var headers: [String] = []
        var description: String { name }
    }

    static let snapshot = TestRelay.liveSnapshot
    static func send(_ replace: (String, String)) -> String { TestRelay.send().replacingOccurrences(of: replace.0, with: replace.1) }

    static let cases: [Case] = [
        Case(name: "malformed JSON", body: #"{"app":"app-a","#, status: 400, type: "InvalidRequest", field: "body"),
        Case(name: "not an object", body: "[1,2]", status: 400, type: "InvalidRequest", field: "body"),
        Case(name: "an empty body", body: "", status: 400, type: "InvalidRequest", field: "body"),
        Case(name: "the wrong content type", body: TestRelay.send(), status: 415, type: "UnsupportedMediaType", headers: ["content-type: text/plain"]),
        Case(name: "app of the wrong type", body: send((#""app":"app-a""#, #""app":7"#)), status: 400, type: "InvalidRequest", field: "app"),
        Case(name: "a missing operation", body: send((#""operation":"alert","#, "")), status: 400, type: "InvalidRequest", field: "operation"),
        Case(name: "an unknown operation", body: send((#""operation":"alert""#, #""operation":"shout""#)), status: 400, type: "InvalidRequest", field: "operation"),
        Case(name: "an unknown environment", body: send((#""environment":"development""#, #""environment":"staging""#)), status: 400, type: "InvalidRequest", field: "environment"),
        Case(name: "an unknown field", body: TestRelay.send(extra: #","colour":"red""#), status: 400, type: "InvalidRequest", field: "colour"),
        Case(name: "a field the operation does not use", body: TestRelay.send(extra: #","channelId":"abc""#), status: 400, type: "InvalidRequest", field: "channelId"),
        Case(name: "tokens outside a batch", body: TestRelay.send(extra: #","tokens":["aa"]"#), status: 400, type: "InvalidRequest", field: "tokens"),
        Case(name: "priority out of range", body: TestRelay.send(extra: #","priority":7"#), status: 400, type: "InvalidRequest", field: "priority"),
        Case(name: "priority as a string", body: TestRelay.send(extra: #","priority":"10""#), status: 400, type: "InvalidRequest", field: "priority"),
        Case(name: "a malformed apnsId", body: TestRelay.send(extra: #","apnsId":"123""#), status: 400, type: "InvalidRequest", field: "apnsId"),
        Case(name: "a collapse id over 64 bytes", body: TestRelay.send(extra: #","collapseId":"\#(String(repeating: "c", count: 65))""#), status: 400, type: "InvalidRequest", field: "collapseId"),
        Case(name: "a token that is not hex", body: TestRelay.send(token: "zz" + String(repeating: "0", count: 62)), status: 400, type: "Preflight", field: nil, reason: "BadDeviceToken"),
        Case(name: "a token too short", body: TestRelay.send(token: "abcd"), status: 400, type: "Preflight", reason: "BadDeviceToken"),
        Case(name: "a snapshot breaking the contract", body: TestRelay.send(snapshot: snapshot.replacingOccurrences(of: #""progress":0.4"#, with: #""progress":1.5"#)),
             status: 400, type: "InvalidSnapshot", field: "snapshot.liveActivity.progress"),
        Case(name: "a snapshot missing a required field", body: TestRelay.send(snapshot: snapshot.replacingOccurrences(of: #""surfaceId":"surface-e2e","#, with: "")),
             status: 400, type: "InvalidSnapshot", field: "snapshot.surfaceId"),
        Case(name: "a notification snapshot for a Live Activity update (wrong kind)",
             body: TestRelay.send("update", snapshot: TestRelay.notificationSnapshot, extra: #","timestamp":1700000000"#), status: 400, type: "InvalidSnapshot"),
        Case(name: "a raw payload over 4 KB", body: #"{"app":"app-a","environment":"development","operation":"raw","token":"\#(TestRelay.token(1))","headers":{"apns-push-type":"alert"},"payload":{"aps":{"alert":"\#(String(repeating: "x", count: 5000))"}}}"#,
             status: 413, type: "Preflight", reason: "PayloadTooLarge"),
        Case(name: "a raw send without a push type", body: #"{"app":"app-a","environment":"development","operation":"raw","token":"\#(TestRelay.token(1))","payload":{"aps":{}}}"#,
             status: 400, type: "Preflight", field: "apns-push-type"),
        Case(name: "a body over the ingress limit", body: TestRelay.send(extra: #","pad":"\#(String(repeating: "p", count: 70 * 1024))""#), status: 413, type: "PayloadTooLarge"),
        Case(name: "a batch without items", path: "/v1/send/batch", body: "{}", status: 400, type: "InvalidRequest", field: "items"),
        Case(name: "a batch with an unknown envelope field", path: "/v1/send/batch", body: #"{"items":[],"x":1}"#, status: 400, type: "InvalidRequest", field: "x"),
        Case(name: "a batch of zero items", path: "/v1/send/batch", body: #"{"items":[]}"#, status: 400, type: "InvalidRequest", field: "items"),
        Case(name: "a channel with an unknown storage policy", path: "/v1/channels", body: #"{"app":"app-a","environment":"development","storagePolicy":"forever"}"#,
             status: 400, type: "InvalidRequest", field: "storagePolicy"),
    ]

    @Test("each bad request gets a clear 4xx and nothing reaches APNs", arguments: cases)
    func badInput(_ check: Case) async throws {
        try await withRelay { relay in
            let answer = try await relay.curl("POST", check.path, body: check.body, headers: check.headers)
            #expect(answer.status == check.status, "\(check.name): \(answer)")
            let error = try #require(answer.error, "\(answer)")
            #expect(error["type"] == .string(check.type), "\(answer)")
            #expect(error["message"]?.stringValue?.isEmpty == false)
            if let field = check.field { #expect(error["field"] == .string(field), "\(answer)") }
            if let reason = check.reason { #expect(error["reason"] == .string(reason), "\(answer)") }
            #expect(relay.apnsRequests == 0, "\(check.name) must not reach APNs")
        }
    }

    @Test("a batch over the item limit is refused whole")
    func batchTooBig() async throws {
        try await withRelay(configure: { $0.ingress.maximumBatchItems = 3; $0.ingress.maximumBodyBytes = 1 << 20 }) { relay in
            let items = Array(repeating: TestRelay.send(), count: 4).joined(separator: ",")
            let answer = try await relay.curl("POST", "/v1/send/batch", body: #"{"items":[\#(items)]}"#)
            #expect(answer.status == 413, "\(answer)")
            #expect(answer.error?["field"] == "items")
            #expect(relay.apnsRequests == 0)
        }
    }

    @Test("an invalid snapshot is still audited and counted with trap MS008")
    func invalidSnapshotCounted() async throws {
        try await withRelay { relay in
            let bad = TestRelay.send(snapshot: TestRelay.liveSnapshot.replacingOccurrences(of: #""progress":0.4"#, with: #""progress":2"#))
            let answer = try await relay.curl("POST", "/v1/send", body: bad)
            #expect(answer.error?["trapId"] == "MS008")
            #expect(answer.error?["attempts"] == .integer(0))
            let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase)
            #expect(scrape.body.contains(#"apns_relay_trap_hits_total{trap="MS008",operation="alert"} 1"#))
            #expect(scrape.body.contains(#"apns_relay_sends_total{app="app-a",operation="alert",outcome="rejected",reason="InvalidSnapshot"} 1"#))
        }
    }
}
