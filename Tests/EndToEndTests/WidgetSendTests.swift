import Foundation
import RelayJSON
import Testing
import TestSupport

/// The `widget` operation end to end: a WidgetKit reload for each of the four
/// WidgetKit kinds, through the ingress, the relay and a mock APNs over real
/// TLS HTTP/2, into the audit; refusals for the wrong kinds; the batch route
/// and `apns-relay describe`.
@Suite("Widget reloads end to end")
struct WidgetSendTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("SurfacesTests/Fixtures/fixtures")

    /// A reference fixture without the editor-only `$schema` key the contract's objects do not allow.
    static func snapshot(_ name: String) throws -> (text: String, value: JSONObject) {
        let data = try Data(contentsOf: fixtures.appendingPathComponent(name))
        let parsed = try #require(try JSONParser.parse([UInt8](data)).objectValue)
        let object = JSONObject(parsed.members.filter { $0.key != "$schema" }.map { ($0.key, $0.value) })
        return (JSONValue.object(object).encodedString(), object)
    }

    /// The exact body a reload for `snapshot` must carry.
    static func expectedBody(_ snapshot: JSONObject) -> String {
        let s = { (key: String) in snapshot[key]!.stringValue! }
        return #"{"aps":{"content-changed":true},"liveSurface":{"kind":"surface_reload","surfaceKind":"\#(s("kind"))","snapshotId":"\#(s("id"))","surfaceId":"\#(s("surfaceId"))","state":"\#(s("state"))","updatedAt":"\#(s("updatedAt"))"}}"#
    }

    static let kinds = ["widget-dashboard.json", "standby-card.json", "lock-accessory-circular.json", "control-toggle.json"]

    @Test("each WidgetKit kind reaches the mock as push type widgets on <bundle>.push-type.widgets with the exact payload; its audit row and metrics say widget")
    func reloadPerKind() async throws {
        let url = ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"]
        try await withRelay(databaseURL: url) { relay in
            for (index, name) in Self.kinds.enumerated() {
                let (text, object) = try Self.snapshot(name)
                let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send("widget", token: TestRelay.token(40 + index), snapshot: text))
                #expect(answer.status == 200, "\(name): \(answer)")
                let apnsID = try #require(answer.json?["apnsId"]?.stringValue)
                let entry = try #require(relay.mock.engine.log.attempts(apnsID: apnsID).first, "\(name): the mock saw no request")
                #expect(entry.status == 200)
                #expect(entry.request.path == "/3/device/\(TestRelay.token(40 + index))")
                #expect(entry.request.header("apns-push-type") == "widgets")
                #expect(entry.request.header("apns-topic") == "com.example.a.push-type.widgets")
                #expect(entry.request.header("apns-priority") == nil, "Apple's widget request carries no priority")
                #expect(entry.request.header("apns-expiration") == nil)
                #expect(String(decoding: entry.request.body, as: UTF8.self) == Self.expectedBody(object), "\(name)")

                guard let url else { continue }
                #expect(await eventually { relay.server.audit.statistics.written >= index + 1 })
                let (status, output) = try await ProcessRunner.runOffPool([
                    "psql", url, "-At", "-c", "SELECT operation, outcome, status, snapshot_id, surface_id FROM apns_audit WHERE apns_id = '\(apnsID)'",
                ])
                #expect(status == 0, "\(output)")
                let row = "widget|success|200|\(object["id"]!.stringValue!)|\(object["surfaceId"]!.stringValue!)"
                #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == row, "\(name)")
            }
            #expect(relay.apnsRequests == Self.kinds.count)

            // The metrics label the sends operation="widget".
            let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase)
            let line = scrape.body.split(separator: "\n").first {
                $0.hasPrefix("apns_relay_sends_total{") && $0.contains(#"operation="widget""#) && $0.contains(#"outcome="success""#)
            }
            #expect(line?.hasSuffix(" \(Self.kinds.count)") == true, "\(line ?? "no widget line in the scrape")")
        }
    }

    @Test("a widget send with a liveActivity or notification snapshot, and a Live Activity or alert send with a widget snapshot, is a 400 naming snapshot.kind; nothing is sent")
    func wrongKinds() async throws {
        try await withRelay { relay in
            for (snapshot, kind) in [(TestRelay.liveSnapshot, "liveActivity"), (TestRelay.notificationSnapshot, "notification")] {
                let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send("widget", snapshot: snapshot))
                #expect(answer.status == 400, "\(answer)")
                #expect(answer.error?["type"] == "InvalidSnapshot")
                #expect(answer.error?["field"] == "snapshot.kind")
                #expect(answer.error?["message"]?.stringValue == #"snapshot.kind is "\#(kind)" but a widget reload needs a control or lockAccessory or standby or widget snapshot"#, "\(answer)")
            }
            let widget = try Self.snapshot("widget-dashboard.json").text
            for operation in ["alert", "notification", "update"] {
                let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send(operation, snapshot: widget))
                #expect(answer.status == 400, "\(operation): \(answer)")
                #expect(answer.error?["field"] == "snapshot.kind", "\(operation): \(answer)")
                #expect(answer.error?["message"]?.stringValue?.hasPrefix(#"snapshot.kind is "widget" but "#) == true, "\(answer)")
            }
            // A widget reload takes no Live Activity fields.
            let extra = try await relay.curl("POST", "/v1/send", body: TestRelay.send("widget", snapshot: widget, extra: #","timestamp":1700000000"#))
            #expect(extra.status == 400)
            #expect(extra.error?["field"] == "timestamp")
            #expect(extra.error?["message"]?.stringValue == "timestamp: is not used by operation widget", "\(extra)")
            #expect(relay.apnsRequests == 0)
        }
    }

    @Test("the batch route fans a widget item out to its tokens, beside other operations")
    func batch() async throws {
        try await withRelay { relay in
            let standby = try Self.snapshot("standby-card.json")
            let tokens = (60..<63).map { "\"\(TestRelay.token($0))\"" }.joined(separator: ",")
            let body = #"{"items":[{"app":"app-a","environment":"development","operation":"widget","tokens":[\#(tokens)],"snapshot":\#(standby.text)},"#
                + #"{"app":"app-a","environment":"development","operation":"alert","token":"\#(TestRelay.token(70))","snapshot":\#(TestRelay.liveSnapshot)}]}"#
            let answer = try await relay.curl("POST", "/v1/send/batch", body: body)
            #expect(answer.status == 200, "\(answer)")
            let results = try #require(answer.json?["results"]?.arrayValue)
            #expect(results.count == 4)
            #expect(results.allSatisfy { $0["ok"] == .bool(true) }, "\(answer)")
            let widgets = relay.mock.engine.log.entries.filter { $0.request.header("apns-push-type") == "widgets" }
            #expect(Set(widgets.map(\.request.path)) == Set((60..<63).map { "/3/device/\(TestRelay.token($0))" }))
            #expect(widgets.allSatisfy { String(decoding: $0.request.body, as: UTF8.self) == Self.expectedBody(standby.value) && $0.status == 200 })
            #expect(relay.apnsRequests == 4)
        }
    }

    @Test("POST /v1/describe and apns-relay describe print the widget request and send nothing; apns-relay send widget sends it")
    func describe() async throws {
        try await withRelay { relay in
            let lock = try Self.snapshot("lock-accessory-rectangular.json")
            let answer = try await relay.curl("POST", "/v1/describe", body: TestRelay.send("widget", snapshot: lock.text))
            #expect(answer.status == 200, "\(answer)")
            #expect(answer.json?["url"]?.stringValue?.hasSuffix("/3/device/\(TestRelay.token(1))") == true, "\(answer)")
            #expect(answer.json?["headers"]?["apns-push-type"] == "widgets")
            #expect(answer.json?["headers"]?["apns-topic"] == "com.example.a.push-type.widgets")
            #expect(answer.json?["headers"]?["apns-priority"] == nil)
            #expect(answer.json?["payload"]?.encodedString() == Self.expectedBody(lock.value))

            let file = relay.directory + "/lock.json"
            try lock.text.write(toFile: file, atomically: true, encoding: .utf8)
            let printed = try await ProcessRunner.runOffPool([
                RelayProcess.binary, "describe", "--operation", "widget", "--bundle-id", "com.example.a", "--token", TestRelay.token(9), "--snapshot-file", file,
            ])
            #expect(printed.status == 0, "\(printed.output)")
            let json = try JSONParser.parse(Array(printed.output.utf8))
            #expect(json["operation"] == "widget")
            #expect(json["method"] == "POST")
            #expect(json["path"]?.stringValue == "/3/device/\(TestRelay.token(9))")
            #expect(json["headers"]?.objectValue?.keys == ["apns-push-type", "apns-topic", "apns-id"])
            #expect(json["headers"]?["apns-push-type"] == "widgets")
            #expect(json["headers"]?["apns-topic"] == "com.example.a.push-type.widgets")
            #expect(json["payload"]?.encodedString() == Self.expectedBody(lock.value))
            #expect(json["bytes"]?.integerValue == Int64(Self.expectedBody(lock.value).utf8.count))

            let refused = try await ProcessRunner.runOffPool([
                RelayProcess.binary, "describe", "--operation", "update", "--bundle-id", "com.example.a", "--token", TestRelay.token(9), "--snapshot-file", file,
            ])
            #expect(refused.status != 0)
            #expect(refused.output.contains(#"$.kind is "lockAccessory""#), "\(refused.output)")
            #expect(relay.apnsRequests == 0)

            // apns-relay send widget: the same request, sent to the mock.
            let sent = try await ProcessRunner.runOffPool([
                RelayProcess.binary, "send", "widget", "--token", TestRelay.token(10), "--snapshot-file", file,
                "--bundle-id", "com.example.a", "--key-id", "E2EKEY1234", "--team-id", "E2ETEAM123", "--key-path", relay.keyPath,
                "--origin", "127.0.0.1:\(relay.mock.port)", "--ca-file", relay.mock.certificateFile,
            ])
            #expect(sent.status == 0, "\(sent.output)")
            #expect(sent.output.contains("push type: widgets"))
            #expect(sent.output.contains("topic:     com.example.a.push-type.widgets"))
            #expect(sent.output.contains("payload:   \(Self.expectedBody(lock.value)) ("), "\(sent.output)")
            #expect(sent.output.contains("answer:    200 apns-id "))
            #expect(relay.apnsRequests == 1)
            #expect(relay.mock.engine.log.entries.first?.request.header("apns-push-type") == "widgets")
        }
    }
}
