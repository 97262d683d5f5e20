import APNs
import RelayJSON
import Testing
import RelayBasics

@Suite("Request builder: WidgetKit reloads")
struct WidgetRequestTests {
    let sidecar = JSONObject([("liveSurface", ["kind": "surface_reload", "surfaceKind": "widget", "snapshotId": "w-1"])])

    @Test("widget: push type widgets, suffixed topic, no priority or expiration, aps exactly content-changed, sidecar beside it")
    func widgetReload() throws {
        let request = try fixedBuilder().widgetReload(token: deviceToken, sidecar: sidecar)
        #expect(request.operation == .widget)
        #expect(request.method == .POST)
        #expect(request.destination == .send)
        #expect(request.path == "/3/device/\(deviceToken)")
        #expect(headers(request) == [
            "apns-push-type: widgets", "apns-topic: com.example.app.push-type.widgets", "apns-id: \(fixedID)",
        ])
        #expect(body(request) == #"{"aps":{"content-changed":true},"liveSurface":{"kind":"surface_reload","surfaceKind":"widget","snapshotId":"w-1"}}"#)
        #expect(request.pushType == .widgets)
        #expect(request.priority == nil)
        #expect(request.topic == "com.example.app.push-type.widgets")
    }

    @Test("widget: Apple's bare request without a sidecar; a caller's priority, expiration and collapse id are sent as given")
    func widgetOptions() throws {
        let bare = try fixedBuilder().widgetReload(token: deviceToken)
        #expect(body(bare) == #"{"aps":{"content-changed":true}}"#)
        let request = try fixedBuilder().widgetReload(
            token: deviceToken, options: .init(priority: .immediate, expiration: 1_700_000_600, collapseID: "w"))
        #expect(headers(request) == [
            "apns-push-type: widgets", "apns-topic: com.example.app.push-type.widgets", "apns-priority: 10",
            "apns-expiration: 1700000600", "apns-collapse-id: w", "apns-id: \(fixedID)",
        ])
        #expect(request.priority == .immediate)
    }

    @Test("widget: a sidecar may not carry aps, and the whole payload must fit 4096 bytes")
    func widgetRefusals() throws {
        let withAPS = JSONObject([("aps", ["alert": "x"])])
        let error = try #require(throws: APNsError.self) { try fixedBuilder().widgetReload(token: deviceToken, sidecar: withAPS) }
        #expect(error.code == .invalidPayload)
        #expect(error.field == "sidecar.aps")

        // 4096 bytes exactly passes; one more is PayloadTooLarge.
        let overhead = #"{"aps":{"content-changed":true},"pad":""}"#.utf8.count
        let fits = JSONObject([("pad", .string(String(repeating: "x", count: 4096 - overhead)))])
        #expect(try fixedBuilder().widgetReload(token: deviceToken, sidecar: fits).body.count == 4096)
        let over = JSONObject([("pad", .string(String(repeating: "x", count: 4097 - overhead)))])
        let tooLarge = try #require(throws: APNsError.self) { try fixedBuilder().widgetReload(token: deviceToken, sidecar: over) }
        #expect(tooLarge.code == .payloadTooLarge)
    }

    @Test("raw widgets: aps must be exactly content-changed true; APNs' default priority (no header) unless given")
    func rawWidgets() throws {
        let good = try fixedBuilder().raw(
            token: deviceToken, payload: ["aps": ["content-changed": true], "x": 1], headers: [HTTPHeader("apns-push-type", "widgets")])
        #expect(headers(good) == ["apns-push-type: widgets", "apns-topic: com.example.app.push-type.widgets", "apns-id: \(fixedID)"])
        for payload: JSONValue in [
            ["aps": ["content-changed": true, "alert": "hi"]], ["aps": ["content-changed": 1]], ["aps": ["content-available": 1]], ["x": 1],
        ] {
            let error = try #require(throws: APNsError.self) {
                try fixedBuilder().raw(token: deviceToken, payload: payload, headers: [HTTPHeader("apns-push-type", "widgets")])
            }
            #expect(error.code == .invalidPayload, "\(payload)")
            #expect(error.field == "payload.aps", "\(payload)")
        }
    }
}
