import Foundation
import MockAPNs
import RelayJSON
import Testing
import TestSupport

/// Every ingress route, through curl, against a relay sending to a mock APNs over TLS HTTP/2.
@Suite("Ingress routes end to end")
struct IngressRoutesTests {
    @Test("POST /v1/send answers with the send's result, apns-id and a traceparent continuing the caller's trace")
    func send() async throws {
        try await withRelay { relay in
            let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send(), headers: ["traceparent: \(parent)"])
            #expect(answer.status == 200, "\(answer)")
            let body = try #require(answer.json)
            #expect(body["status"] == .integer(200))
            #expect(body["attempts"] == .integer(1))
            #expect(body["retried"] == .bool(false))
            #expect(body["trapHits"] == .array([]))
            #expect(body["latencyMs"]?.numberValue != nil)
            let apnsID = try #require(body["apnsId"]?.stringValue)
            #expect(answer.headers["apns-id"] == apnsID)
            #expect(relay.mock.engine.log.attempts(apnsID: apnsID).count == 1)
            let traceparent = try #require(answer.headers["traceparent"])
            #expect(traceparent.hasPrefix("00-4bf92f3577b34da6a3ce929d0e0e4736-"))
            #expect(!traceparent.contains("00f067aa0ba902b7"), "the answer names the relay's span, not the caller's")
        }
    }

    @Test("a raw send's apnsId is the apns-id APNs receives, on every attempt; with headers.apns-id as well it is a 400 naming apnsId")
    func rawApnsID() async throws {
        try await withRelay(rules: [MockRule(.tokenPrefix("cafe"), [.tooManyRequests(), .succeed])]) { relay in
            let apnsID = "5b0e2f4c-1a3d-4e6f-8b7a-9c0d1e2f3a4b"
            func raw(_ token: String, id: String, headers: String = #""apns-push-type":"alert""#) -> String {
                #"{"app":"app-a","environment":"development","operation":"raw","token":"\#(token)","headers":{\#(headers)},"payload":{"aps":{"alert":"hi"}},"apnsId":"\#(id)"}"#
            }
            let body = raw(TestRelay.token(9, prefix: "cafe"), id: apnsID)
            let answer = try await relay.curl("POST", "/v1/send", body: body)
            #expect(answer.status == 200, "\(answer)")
            #expect(answer.json?["apnsId"]?.stringValue == apnsID && answer.headers["apns-id"] == apnsID, "\(answer)")
            let attempts = relay.mock.engine.log.attempts(apnsID: apnsID)
            #expect(attempts.count == 2, "both attempts reached APNs under the caller's id: \(relay.mock.engine.log.entries.map(\.apnsID))")
            #expect(attempts.allSatisfy { $0.request.header("apns-id") == apnsID })
            // In a batch item too.
            let itemID = "0e6b4a52-8d9f-4c7e-a1b3-5f2d7c9e0a14"
            let batch = try await relay.curl("POST", "/v1/send/batch", body: #"{"items":[\#(raw(TestRelay.token(10), id: itemID))]}"#)
            #expect(batch.json?["results"]?.arrayValue?.first?["apnsId"]?.stringValue == itemID, "\(batch)")
            #expect(relay.mock.engine.log.attempts(apnsID: itemID).first?.request.header("apns-id") == itemID)

            let sent = relay.apnsRequests
            let both = raw(TestRelay.token(11), id: apnsID, headers: #""apns-push-type":"alert","apns-id":"\#(apnsID)""#)
            let refused = try await relay.curl("POST", "/v1/send", body: both)
            #expect(refused.status == 400 && refused.error?["field"] == "apnsId", "\(refused)")
            #expect(relay.apnsRequests == sent)
        }
    }

    @Test("retries show in the answer: TooManyRequests twice, then success")
    func retried() async throws {
        try await withRelay(rules: [MockRule(.tokenPrefix("beef"), [.tooManyRequests(), .tooManyRequests(), .succeed])]) { relay in
            let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(7, prefix: "beef")))
            #expect(answer.status == 200, "\(answer)")
            #expect(answer.json?["attempts"] == .integer(3))
            #expect(answer.json?["retried"] == .bool(true))
            #expect(answer.json?["trapHits"] == .array(["MS015"]))
        }
    }

    @Test("an APNs rejection keeps APNs' status, reason, trap and fix")
    func rejection() async throws {
        try await withRelay(rules: [MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1_700_000_000_000))]) { relay in
            let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(1, prefix: "dead")))
            #expect(answer.status == 410, "\(answer)")
            let error = try #require(answer.error)
            #expect(error["type"] == "APNsRejected")
            #expect(error["reason"] == "Unregistered")
            #expect(error["status"] == .integer(410))
            #expect(error["trapId"]?.stringValue?.hasPrefix("MS") == true)
            #expect(error["fix"]?.stringValue?.isEmpty == false)
            #expect(error["attempts"] == .integer(1))
            #expect(answer.headers["apns-id"] == error["apnsId"]?.stringValue)
        }
    }

    @Test("POST /v1/send/batch answers per send in order; a bad item fails alone; tokens[] fans out")
    func batch() async throws {
        try await withRelay { relay in
            let tokens = (0..<3).map { "\"\(TestRelay.token(100 + $0))\"" }.joined(separator: ",")
            let fanOut = #"{"app":"app-a","environment":"development","operation":"alert","tokens":[\#(tokens)],"snapshot":\#(TestRelay.liveSnapshot)}"#
            let bad = #"{"app":"app-a","environment":"development","operation":"alert","token":"not-hex","snapshot":\#(TestRelay.liveSnapshot)}"#
            let answer = try await relay.curl("POST", "/v1/send/batch", body: #"{"items":[\#(TestRelay.send()),\#(bad),\#(fanOut)]}"#)
            #expect(answer.status == 200, "\(answer)")
            let results = try #require(answer.json?["results"]?.arrayValue)
            #expect(results.count == 5)
            #expect(results.map { $0["item"]?.integerValue } == [0, 1, 2, 2, 2])
            #expect(results.map { $0["ok"] } == [true, false, true, true, true])
            #expect(results[1]["error"]?["reason"] == "BadDeviceToken")
            #expect(results[2...].map { $0["tokenIndex"]?.integerValue } == [0, 1, 2])
            #expect(answer.json?["summary"] == ["total": 5, "succeeded": 4, "failed": 1])
            #expect(relay.apnsRequests == 4, "the bad item was never sent")
        }
    }

    @Test("POST /v1/describe shows the exact request and sends nothing")
    func describe() async throws {
        try await withRelay { relay in
            let answer = try await relay.curl("POST", "/v1/describe", body: TestRelay.send(extra: #","priority":5,"collapseId":"c1""#))
            #expect(answer.status == 200, "\(answer)")
            let body = try #require(answer.json)
            #expect(body["method"] == "POST")
            #expect(body["url"]?.stringValue?.hasSuffix("/3/device/\(TestRelay.token(1))") == true)
            #expect(body["headers"]?["apns-push-type"] == "alert")
            #expect(body["headers"]?["apns-topic"] == "com.example.a")
            #expect(body["headers"]?["apns-priority"] == "5")
            #expect(body["headers"]?["apns-collapse-id"] == "c1")
            #expect(body["headers"]?["authorization"] == nil)
            #expect(body["payload"]?["aps"] != nil)
            #expect(body["payloadBytes"]?.integerValue == Int64(body["payload"]!.encoded().count))
            #expect(relay.apnsRequests == 0)
        }
    }

    @Test("channels: create, broadcast on it, list, read, delete")
    func channels() async throws {
        try await withRelay { relay in
            let created = try await relay.curl("POST", "/v1/channels", body: #"{"app":"app-a","environment":"development","storagePolicy":"most-recent"}"#)
            #expect(created.status == 201, "\(created)")
            let channelID = try #require(created.json?["channelId"]?.stringValue)
            let broadcast = #"{"app":"app-a","environment":"development","operation":"broadcast","channelId":"\#(channelID)","snapshot":\#(TestRelay.liveSnapshot)}"#
            let sent = try await relay.curl("POST", "/v1/send", body: broadcast)
            #expect(sent.status == 200, "\(sent)")
            let listed = try await relay.curl("GET", "/v1/channels?app=app-a&environment=development")
            #expect(listed.status == 200, "\(listed)")
            #expect(listed.json?["channels"]?.arrayValue?.contains(.string(channelID)) == true)
            // Channel ids are base64: "/" and "+" must survive the path, percent-encoded or not.
            let encoded = channelID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? channelID
            // Read: APNs' GET …/channels with apns-channel-id, its policy and push type back.
            let read = try await relay.curl("GET", "/v1/channels/\(encoded)?app=app-a&environment=development")
            #expect(read.status == 200, "\(read)")
            #expect(read.json?["channelId"]?.stringValue == channelID && read.json?["status"] == .integer(200), "\(read)")
            #expect(read.json?["storagePolicy"]?.stringValue == "most-recent-message" && read.json?["pushType"]?.stringValue == "LiveActivity", "\(read)")
            let atAPNs = try #require(relay.mock.engine.log.entries.last?.request)
            #expect(atAPNs.method == "GET" && atAPNs.path == "/1/apps/com.example.a/channels" && atAPNs.headers.value(of: "apns-channel-id") == channelID)
            #expect(read.headers["apns-id"] == atAPNs.headers.value(of: "apns-request-id"), "\(read.headers)")
            let deleted = try await relay.curl("DELETE", "/v1/channels/\(encoded)?app=app-a&environment=development")
            #expect(deleted.status == 200, "\(deleted)")
            #expect(deleted.json?["status"] == .integer(204))
            // A channel APNs no longer has: its 404 ChannelNotRegistered.
            let gone = try await relay.curl("GET", "/v1/channels/\(encoded)?app=app-a&environment=development")
            #expect(gone.status == 404 && gone.json?["error"]?["reason"]?.stringValue == "ChannelNotRegistered", "\(gone)")
            let after = try await relay.curl("GET", "/v1/channels?app=app-a&environment=development")
            #expect(after.json?["channels"]?.arrayValue?.contains(.string(channelID)) == false)
        }
    }

    @Test("POST /3/device/{token} speaks APNs: headers and body in, status, apns-id and reason out")
    func apnsCompatible() async throws {
        try await withRelay(rules: [MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1_700_000_000_000))]) { relay in
            let payload = #"{"aps":{"alert":{"title":"hi","body":"there"}}}"#
            let ok = try await relay.curl("POST", "/3/device/\(TestRelay.token(3))", body: payload,
                                          headers: ["apns-push-type: alert", "apns-topic: com.example.a", "apns-priority: 10"])
            #expect(ok.status == 200, "\(ok)")
            #expect(ok.body.isEmpty)
            let apnsID = try #require(ok.headers["apns-id"])
            #expect(relay.mock.engine.log.attempts(apnsID: apnsID).first?.request.body == Array(payload.utf8))
            let gone = try await relay.curl("POST", "/3/device/\(TestRelay.token(3, prefix: "dead"))", body: payload, headers: ["apns-topic: com.example.a"])
            #expect(gone.status == 410, "\(gone)")
            #expect(gone.json?["reason"] == "Unregistered")
            #expect(gone.json?["timestamp"] == .integer(1_700_000_000_000))
        }
    }

    @Test("GET/PUT /v1/admin/retry flips the kill switch for admin keys only")
    func killSwitch() async throws {
        try await withRelay(rules: [MockRule(.tokenPrefix("beef"), [.tooManyRequests(), .succeed])]) { relay in
            let initial = try await relay.curl("GET", "/v1/admin/retry", key: "admin")
            #expect(initial.status == 200, "\(initial)")
            #expect(initial.json?["retriesDisabled"] == .bool(false))
            #expect(try await relay.curl("PUT", "/v1/admin/retry", key: "backend", body: #"{"disabled":true}"#).status == 403)
            let engaged = try await relay.curl("PUT", "/v1/admin/retry", key: "admin", body: #"{"disabled":true}"#)
            #expect(engaged.json?["retriesDisabled"] == .bool(true))
            #expect(engaged.json?["source"] == "runtime")
            #expect(engaged.json?["instance"] == .string(relay.server.configuration.instance), "the switch is per process; the answer names which: \(engaged)")
            let noRetry = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(9, prefix: "beef")))
            #expect(noRetry.status == 429, "with the switch on the first 429 is final: \(noRetry)")
            #expect(noRetry.headers["retry-after"] != nil)
            let released = try await relay.curl("PUT", "/v1/admin/retry", key: "admin", body: #"{"disabled":false}"#)
            #expect(released.json?["retriesDisabled"] == .bool(false))
            let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase)
            #expect(scrape.body.contains("apns_relay_retry_disabled 0"))
        }
    }

    @Test("/healthz and /readyz answer without a key; draining makes /readyz and new sends 503")
    func healthAndDrain() async throws {
        try await withRelay { relay in
            #expect(try await relay.curl("GET", "/healthz", key: nil).status == 200)
            #expect(try await relay.curl("GET", "/readyz", key: nil).status == 200)
            #expect(try await relay.curl("GET", "/readyz", key: nil, base: relay.metricsBase).status == 200)
            relay.server.ingress.beginDraining()
            let ready = try await relay.curl("GET", "/readyz", key: nil)
            #expect(ready.status == 503 && ready.body.contains("draining"))
            #expect(try await relay.curl("GET", "/readyz", key: nil, base: relay.metricsBase).status == 503)
            let refused = try await relay.curl("POST", "/v1/send", body: TestRelay.send())
            #expect(refused.status == 503 && refused.error?["type"] == "Draining" && refused.headers["retry-after"] != nil)
            #expect(relay.apnsRequests == 0)
        }
    }

    @Test("ingress requests are counted by route and status on /metrics")
    func ingressMetrics() async throws {
        try await withRelay { relay in
            _ = try await relay.curl("POST", "/v1/send", body: TestRelay.send())
            _ = try await relay.curl("POST", "/v1/send", key: nil, body: TestRelay.send())
            let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase)
            #expect(scrape.body.contains(#"apns_relay_ingress_requests_total{route="/v1/send",code="200"} 1"#), "\(scrape.body.prefix(400))")
            #expect(scrape.body.contains(#"apns_relay_ingress_requests_total{route="/v1/send",code="401"} 1"#))
            #expect(scrape.body.contains(#"apns_relay_ingress_request_duration_seconds_count{route="/v1/send"} 2"#))
            #expect(scrape.body.contains(#"apns_relay_build_info{"#) && scrape.body.contains(#"nghttp2=""#))
            #expect(!scrape.body.contains(#"nghttp2="unknown""#))
            // The whole scrape of a running relay, ingress series included, passes Prometheus' own linter.
            let (status, lint) = try await ProcessRunner.runOffPool(["promtool", "check", "metrics"], input: Data(scrape.body.utf8))
            #expect(status == 0, "\(lint)")
        }
    }

    @Test("GET /v1/dead-tokens lists what APNs called dead, from the audit database")
    func deadTokens() async throws {
        guard let url = ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] else { return }
        try await withRelay(rules: [MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1_700_000_000_000))], databaseURL: url) { relay in
            let token = TestRelay.token(Int.random(in: 1...1_000_000), prefix: "dead")
            #expect(try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: token)).status == 410)
            #expect(await eventually { relay.server.audit.statistics.deadTokensUpserted >= 1 })
            let answer = try await relay.curl("GET", "/v1/dead-tokens?app=app-a&since=1h&environment=development")
            #expect(answer.status == 200, "\(answer)")
            let entry = try #require(answer.json?["deadTokens"]?.arrayValue?.first { $0["token"] == .string(token) })
            #expect(entry["reason"] == "Unregistered")
            #expect(entry["environment"] == "development")
            #expect(entry["apnsTimestamp"]?.stringValue?.hasPrefix("2023-11-14T22:13:20") == true)
            #expect(entry["lastSeen"]?.stringValue != nil)
            let bad = try await relay.curl("GET", "/v1/dead-tokens?app=app-a&since=yesterday")
            #expect(bad.status == 400 && bad.error?["field"] == "since")
        }
    }

    @Test("without an audit database the dead-token feed answers 503, not an empty list")
    func deadTokensWithoutDatabase() async throws {
        try await withRelay { relay in
            let answer = try await relay.curl("GET", "/v1/dead-tokens?app=app-a")
            #expect(answer.status == 503 && answer.headers["retry-after"] != nil, "\(answer)")
        }
    }
}
