import Foundation
import RelayJSON
import TestSupport
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
    ] + controlCharacterCases + topicCases

    /// A raw send for app-a with these JSON `headers` members.
    static func raw(_ headers: String, path: String = "/v1/send") -> String {
        #"{"app":"app-a","environment":"development","operation":"raw","token":"\#(TestRelay.token(1))","headers":{"apns-push-type":"alert"\#(headers)},"payload":{"aps":{"alert":"hi"}}}"#
    }

    static let devicePath = "/3/device/\(TestRelay.token(1))"
    static let devicePayload = #"{"aps":{"alert":"hi"}}"#

    /// The campaign's control-character cases: each used to reach APNs (200, or
    /// a reset stream retried 4 times and answered 502 as a transport failure).
    static let controlCharacterCases: [Case] = [
        Case(name: "CR LF in collapseId", body: TestRelay.send(extra: #","collapseId":"a\r\nx""#), status: 400, type: "Preflight", field: "collapseId", reason: "BadCollapseId"),
        Case(name: "NUL in collapseId", body: TestRelay.send(extra: #","collapseId":"a\u0000b""#), status: 400, type: "Preflight", field: "collapseId", reason: "BadCollapseId"),
        Case(name: "NUL in a raw apns-topic", body: raw(#","apns-topic":"com.example.a\u0000""#), status: 400, type: "Preflight", field: "apns-topic", reason: "InvalidHeader"),
        Case(name: "CR LF in a raw header name", body: raw(#","apns-x\r\ninjected":"1""#), status: 400, type: "Preflight", reason: "InvalidHeader"),
        Case(name: "CR LF in a raw header value", body: raw(#","apns-collapse-id":"a\r\napns-topic: com.example.b""#), status: 400, type: "Preflight", field: "apns-collapse-id", reason: "InvalidHeader"),
        Case(name: "0x01 in a raw apns-id", body: raw(#","apns-id":"\u00010f9e8d7c-6b5a-4c3d-8e1f-a0b1c2d3e4f""#), status: 400, type: "Preflight", field: "apns-id", reason: "InvalidHeader"),
        Case(name: "NUL in a raw apns-topic, described", path: "/v1/describe", body: raw(#","apns-topic":"com.example.a\u0000""#), status: 400, type: "Preflight", field: "apns-topic"),
        Case(name: "NUL in the snapshot id", body: TestRelay.send(snapshot: snapshot.replacingOccurrences(of: #""id":"e2e-1""#, with: #""id":"e2e\u00001""#)),
             status: 400, type: "InvalidRequest", field: "snapshot.id"),
        Case(name: "DEL in the snapshot's surfaceId", body: TestRelay.send(snapshot: snapshot.replacingOccurrences(of: #""surfaceId":"surface-e2e""#, with: #""surfaceId":"s\u007f""#)),
             status: 400, type: "InvalidRequest", field: "snapshot.surfaceId"),
        // Control bytes in a real HTTP header are refused by the HTTP layer
        // before any route runs (RequestFraming), still naming the header.
        Case(name: "0x01 in a /3/device apns-collapse-id", path: devicePath, body: devicePayload, status: 400, type: "InvalidRequest", field: "apns-collapse-id",
             headers: ["apns-relay-app: app-a", "apns-collapse-id: a\u{01}b"]),
        Case(name: "0x7f in a /3/device apns-topic", path: devicePath, body: devicePayload, status: 400, type: "InvalidRequest", field: "apns-topic",
             headers: ["apns-relay-app: app-a", "apns-topic: com.example.a\u{7f}"]),
        // Issue 27: each of these was accepted (jsonfoo as JSON, the uppercase
        // id lowercased, the uppercase token sent as another token).
        Case(name: "a content type that only starts with application/json", body: TestRelay.send(), status: 415, type: "UnsupportedMediaType",
             field: "content-type", headers: ["content-type: application/jsonfoo"]),
        Case(name: "an uppercase apnsId", body: TestRelay.send(extra: #","apnsId":"0F9E8D7C-6B5A-4C3D-8E1F-A0B1C2D3E4F5""#), status: 400, type: "InvalidRequest", field: "apnsId"),
        Case(name: "an uppercase token", body: TestRelay.send(token: String(repeating: "AB", count: 32)), status: 400, type: "Preflight", reason: "BadDeviceToken"),
        Case(name: "an uppercase token on /3/device", path: "/3/device/" + String(repeating: "AB", count: 32), body: devicePayload, status: 400, type: "Preflight",
             reason: "BadDeviceToken", headers: ["apns-relay-app: app-a", "apns-topic: com.example.a"]),
        // Issue 27: every recorded string has a maximum (docs/api.md, "Field sizes").
        Case(name: "a snapshot id over 256 bytes", body: TestRelay.send(snapshot: snapshot.replacingOccurrences(of: #""id":"e2e-1""#, with: #""id":"\#(String(repeating: "i", count: 257))""#)),
             status: 400, type: "InvalidRequest", field: "snapshot.id"),
        Case(name: "a surfaceId over 256 bytes in an otherwise invalid snapshot", body: TestRelay.send(snapshot: snapshot.replacingOccurrences(of: #""surfaceId":"surface-e2e""#, with: #""surfaceId":"\#(String(repeating: "s", count: 60_000))""#).replacingOccurrences(of: #""progress":0.4"#, with: #""progress":1.5"#)),
             status: 400, type: "InvalidRequest", field: "snapshot.surfaceId"),
        Case(name: "an app name over 64 bytes", body: TestRelay.send(app: String(repeating: "a", count: 65)), status: 400, type: "InvalidRequest", field: "app"),
        Case(name: "a channelId over 256 bytes", body: #"{"app":"app-a","environment":"development","operation":"broadcast","channelId":"\#(String(repeating: "Q", count: 257))","snapshot":\#(TestRelay.liveSnapshot)}"#,
             status: 400, type: "InvalidRequest", field: "channelId"),
        Case(name: "an attributesType over 256 bytes", body: TestRelay.send("start", extra: #","attributesType":"\#(String(repeating: "T", count: 257))""#), status: 400, type: "InvalidRequest", field: "attributesType"),
        Case(name: "a raw header value over 256 bytes", body: raw(#","apns-topic":"com.example.a.\#(String(repeating: "t", count: 300))""#), status: 400, type: "InvalidRequest", field: "headers.apns-topic"),
        Case(name: "more than 16 raw headers", body: raw((0..<16).map { #","apns-x-\#($0)":"v""# }.joined()), status: 400, type: "InvalidRequest", field: "headers"),
        Case(name: "a /3/device apns-topic over 256 bytes", path: devicePath, body: devicePayload, status: 400, type: "InvalidRequest", field: "apns-topic",
             headers: ["apns-relay-app: app-a", "apns-topic: com.example.a.\(String(repeating: "t", count: 300))"]),
        Case(name: "a year-5138 Live Activity timestamp", body: TestRelay.send("update", extra: #","timestamp":99999999999"#), status: 400, type: "Preflight",
             field: "aps.timestamp", reason: "BadDate"),
    ]

    /// A key scoped to app-a may not reach app-b's topic, on any route.
    static let topicCases: [Case] = [
        Case(name: "a raw send to another app's topic", body: raw(#","apns-topic":"com.example.b""#), status: 403, type: "Forbidden", field: "apns-topic", reason: "TopicNotForApp"),
        Case(name: "a raw send to another app's Live Activity topic", body: raw(#","apns-topic":"com.example.b.push-type.liveactivity""#), status: 403, type: "Forbidden",
             field: "apns-topic", reason: "TopicNotForApp"),
        Case(name: "a describe of another app's topic", path: "/v1/describe", body: raw(#","apns-topic":"com.example.b""#), status: 403, type: "Forbidden", field: "apns-topic"),
        Case(name: "/3/device naming app-a with app-b's topic", path: devicePath, body: devicePayload, status: 403, type: "Forbidden", field: "apns-topic",
             reason: "TopicNotForApp", headers: ["apns-relay-app: app-a", "apns-topic: com.example.b"]),
        Case(name: "/3/device with app-b's topic and the key's app inferred", path: devicePath, body: devicePayload, status: 403, type: "Forbidden",
             headers: ["apns-topic: com.example.b"]),
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

    @Test("an out-of-range since is a 400 naming since, and the relay lives on", arguments: ["99999999999999999d", "9223372036854775807s", "106751991167300d", "36501d", "-1d"])
    func sinceOutOfRange(_ since: String) async throws {
        try await withRelay { relay in
            let answer = try await relay.curl("GET", "/v1/dead-tokens?app=app-a&since=\(since)")
            #expect(answer.status == 400, "\(answer)")
            #expect(answer.error?["type"] == "InvalidRequest" && answer.error?["field"] == "since", "\(answer)")
            #expect(try await relay.curl("GET", "/healthz", key: nil).status == 200, "the relay must survive")
        }
    }

    @Test("a database error is a 503 without the host or port; the detail goes to the log")
    func deadTokensDatabaseDown() async throws {
        try await withRelay(databaseURL: "postgresql://postgres@127.0.0.1:1/none?connect_timeout=1") { relay in
            let answer = try await relay.curl("GET", "/v1/dead-tokens?app=app-a&since=1h")
            #expect(answer.status == 503, "\(answer)")
            #expect(answer.error?["message"] == "the audit database is unavailable; retry later", "\(answer)")
            for leak in ["127.0.0.1", "port", "connection to server", "postgres"] { #expect(!answer.body.contains(leak), "\(answer)") }
            #expect(answer.headers["retry-after"] != nil)
            // Input checks come first: a bad since is still the caller's 400.
            #expect(try await relay.curl("GET", "/v1/dead-tokens?app=app-a&since=99999999999999999d").status == 400)
        }
    }

    @Test("a batch item refuses an apnsId shared by several tokens and another app's topic; the rest of the batch goes")
    func batchItems() async throws {
        try await withRelay { relay in
            let shared = TestRelay.send(extra: #","apnsId":"0f9e8d7c-6b5a-4c3d-8e1f-a0b1c2d3e4f5""#)
                .replacingOccurrences(of: #""token":"\#(TestRelay.token(1))""#, with: #""tokens":["\#(TestRelay.token(1))","\#(TestRelay.token(2))"]"#)
            let foreign = Self.raw(#","apns-topic":"com.example.b""#)
            let answer = try await relay.curl("POST", "/v1/send/batch", body: #"{"items":[\#(shared),\#(foreign),\#(TestRelay.send())]}"#)
            #expect(answer.status == 200, "\(answer)")
            let results = try #require(answer.json?["results"]?.arrayValue, "\(answer)")
            #expect(results.count == 3, "\(answer)")
            #expect(results[0]["ok"] == .bool(false) && results[0]["error"]?["field"] == "items[0].apnsId", "\(answer)")
            #expect(results[0]["error"]?["type"] == "InvalidRequest")
            #expect(results[1]["ok"] == .bool(false) && results[1]["error"]?["type"] == "Forbidden", "\(answer)")
            #expect(results[1]["error"]?["reason"] == "TopicNotForApp", "\(answer)")
            #expect(results[2]["ok"] == .bool(true), "\(answer)")
            #expect(relay.apnsRequests == 1, "only the good item reaches APNs")
        }
    }

    @Test("a batch larger than the key's burst is a 429 saying so, with no Retry-After to retry it as is")
    func batchOverBurst() async throws {
        try await withRelay { relay in
            // "limited": burst 2. Three sends can never be charged, however long the caller waits.
            let items = [TestRelay.send(), TestRelay.send(), TestRelay.send()].joined(separator: ",")
            let answer = try await relay.curl("POST", "/v1/send/batch", key: "limited", body: #"{"items":[\#(items)]}"#)
            #expect(answer.status == 429, "\(answer)")
            #expect(answer.error?["type"] == "BatchExceedsBurst" && answer.error?["field"] == "items", "\(answer)")
            #expect(answer.error?["message"]?.stringValue?.contains("burst of 2") == true, "\(answer)")
            #expect(answer.headers["retry-after"] == nil, "\(answer.headers)")
            #expect(relay.apnsRequests == 0)
        }
    }

    @Test("a refused far-future timestamp does not block the activity's later updates")
    func futureTimestampDoesNotBlock() async throws {
        try await withRelay { relay in
            let future = try await relay.curl("POST", "/v1/send", body: TestRelay.send("update", extra: #","timestamp":99999999999"#))
            #expect(future.status == 400 && future.error?["field"] == "aps.timestamp", "\(future)")
            let next = try await relay.curl("POST", "/v1/send", body: TestRelay.send("update", extra: #","timestamp":1700000000"#))
            #expect(next.status == 200, "\(next)")
            #expect(relay.apnsRequests == 1)
        }
    }

    @Test("input refused for control characters leaves the audit writing: later rows land, none is dropped")
    func auditNotPoisoned() async throws {
        guard let url = ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] else { return }
        try await withRelay(databaseURL: url) { relay in
            let nulTopic = try await relay.curl("POST", "/v1/send", body: Self.raw(#","apns-topic":"com.example.a\u0000""#))
            #expect(nulTopic.status == 400, "\(nulTopic)")
            let nulID = TestRelay.send(snapshot: Self.snapshot.replacingOccurrences(of: #""id":"e2e-1""#, with: #""id":"e2e\u00001""#))
            #expect(try await relay.curl("POST", "/v1/send", body: nulID).status == 400)
            let good = try await relay.curl("POST", "/v1/send", body: TestRelay.send())
            let apnsID = try #require(good.json?["apnsId"]?.stringValue, "\(good)")
            // The refused raw send is audited (rejected, no topic); the snapshot one never became a send.
            #expect(await eventually { relay.server.audit.statistics.written >= 2 }, "\(relay.server.audit.statistics)")
            #expect(relay.server.audit.statistics.dropped == 0)
            let (status, output) = try await ProcessRunner.runOffPool(["psql", url, "-At", "-c", "SELECT outcome FROM apns_audit WHERE apns_id = '\(apnsID)'"])
            #expect(status == 0 && output.trimmingCharacters(in: .whitespacesAndNewlines) == "success", "\(output)")
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
