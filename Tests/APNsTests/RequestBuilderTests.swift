import APNs
import RelayJSON
import Testing
import RelayBasics

/// A builder with a fixed clock and a fixed apns-id, so requests are exact.
func fixedBuilder(bundleID: String = "com.example.app") throws -> RequestBuilder {
    try RequestBuilder(bundleID: bundleID, now: { 1_700_000_000 }, makeID: { fixedID })
}

let fixedID = APNsID("0f9e8d7c-6b5a-4c3d-8e1f-a0b1c2d3e4f5")!
let deviceToken = String(repeating: "ab", count: 32)
let channel = "dHJhaW4tY2hhbm5lbC0x"  // base64 of "train-channel-1"

func headers(_ request: APNsRequest) -> [String] { request.headers.map(\.description) }
func body(_ request: APNsRequest) -> String { String(decoding: request.body, as: UTF8.self) }

@Suite("Request builder: device sends")
struct DeviceRequestTests {
    @Test("alert: bare topic, priority 10, expiration now+3600, apns-id last")
    func alert() throws {
        let payload: JSONValue = ["aps": ["alert": ["title": "Hi", "body": "There"], "sound": "default"]]
        let request = try fixedBuilder().alert(token: deviceToken, payload: payload)
        #expect(request.operation == .alert)
        #expect(request.method == .POST)
        #expect(request.destination == .send)
        #expect(request.path == "/3/device/\(deviceToken)")
        #expect(headers(request) == [
            "apns-push-type: alert", "apns-topic: com.example.app", "apns-priority: 10",
            "apns-expiration: 1700003600", "apns-id: 0f9e8d7c-6b5a-4c3d-8e1f-a0b1c2d3e4f5",
        ])
        #expect(body(request) == #"{"aps":{"alert":{"title":"Hi","body":"There"},"sound":"default"}}"#)
        #expect(request.tokenFingerprint?.count == 12)
    }

    @Test("notification: same wire shape as alert, own operation; options override defaults")
    func notification() throws {
        let caller = try #require(APNsID("AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE"))
        let request = try fixedBuilder().notification(
            token: deviceToken, payload: ["aps": ["alert": "x"]],
            options: .init(apnsID: caller, priority: .conservePower, expiration: 0, collapseID: "order-42"))
        #expect(request.operation == .notification)
        #expect(headers(request) == [
            "apns-push-type: alert", "apns-topic: com.example.app", "apns-priority: 5", "apns-expiration: 0",
            "apns-collapse-id: order-42", "apns-id: aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee",
        ])
        #expect(request.apnsID == caller)
    }

    @Test("background: content-available only, priority 5, custom data beside aps")
    func background() throws {
        let request = try fixedBuilder().background(token: deviceToken, customData: JSONObject([("sync", "inbox")]))
        #expect(headers(request) == [
            "apns-push-type: background", "apns-topic: com.example.app", "apns-priority: 5",
            "apns-expiration: 1700003600", "apns-id: \(fixedID)",
        ])
        #expect(body(request) == #"{"aps":{"content-available":1},"sync":"inbox"}"#)
    }

    @Test("raw: caller's headers checked and kept, topic suffixed by push type, content-type dropped")
    func raw() throws {
        let request = try fixedBuilder().raw(
            token: deviceToken, payload: ["aps": ["content-available": 1]],
            headers: [
                HTTPHeader("APNS-Push-Type", "voip"), HTTPHeader("content-type", "application/json"),
                HTTPHeader("apns-expiration", "1700000100"), HTTPHeader("apns-custom-flag", "1"),
            ])
        #expect(request.operation == .raw)
        #expect(headers(request) == [
            "apns-push-type: voip", "apns-topic: com.example.app.voip", "apns-priority: 10",
            "apns-expiration: 1700000100", "apns-id: \(fixedID)", "apns-custom-flag: 1",
        ])
    }

    @Test("push types carry Apple's topic suffixes and default priorities")
    func pushTypes() {
        #expect(PushType.liveactivity.topic(forBundleID: "a.b") == "a.b.push-type.liveactivity")
        #expect(PushType.complication.topic(forBundleID: "a.b") == "a.b.complication")
        #expect(PushType.fileprovider.topic(forBundleID: "a.b") == "a.b.pushkit.fileprovider")
        #expect(PushType.location.topic(forBundleID: "a.b") == "a.b.location-query")
        #expect(PushType.pushtotalk.topic(forBundleID: "a.b") == "a.b.voip-ptt")
        #expect(PushType.widgets.topic(forBundleID: "a.b") == "a.b.push-type.widgets")
        #expect(PushType.alert.defaultPriority == .immediate)
        #expect(PushType.background.defaultPriority == .conservePower)
        #expect(PushType.liveactivity.defaultPriority == .conservePower)
        #expect(PushType.widgets.defaultPriority == nil, "Apple's widget request carries no apns-priority")
        #expect(PushType.voip.maximumPayloadBytes == 5120)
        #expect(PushType.alert.maximumPayloadBytes == 4096)
    }
}

@Suite("Request builder: Live Activities, broadcast, channels")
struct LiveActivityRequestTests {
    let state: JSONValue = ["title": "Build", "progress": 0.5]

    @Test("start: suffixed topic, priority 5, attributes and alert, no expiration by default")
    func start() throws {
        let content = LiveActivityContent(
            contentState: state, attributes: ["surfaceId": "s-1", "modeLabel": "queued"])
        var withStartFields = content
        withStartFields.attributesType = "MobileSurfacesActivityAttributes"
        withStartFields.alert = ["title": "Started", "body": "Tap to follow"]
        let request = try fixedBuilder().liveActivity(.start, token: deviceToken, content: withStartFields)
        #expect(request.operation == .start)
        #expect(headers(request) == [
            "apns-push-type: liveactivity", "apns-topic: com.example.app.push-type.liveactivity",
            "apns-priority: 5", "apns-id: \(fixedID)",
        ])
        #expect(body(request) == #"{"aps":{"timestamp":1700000000,"event":"start","content-state":{"title":"Build","progress":0.5},"attributes-type":"MobileSurfacesActivityAttributes","attributes":{"surfaceId":"s-1","modeLabel":"queued"},"alert":{"title":"Started","body":"Tap to follow"}}}"#)
    }

    @Test("update: timestamp, stale date and relevance score as given")
    func update() throws {
        let content = LiveActivityContent(contentState: state, timestamp: 1_700_000_123, staleDate: 1_700_003_600, relevanceScore: 75)
        let request = try fixedBuilder().liveActivity(.update, token: deviceToken, content: content, options: .init(priority: .immediate))
        #expect(request.header("apns-priority") == "10")
        #expect(body(request) == #"{"aps":{"timestamp":1700000123,"event":"update","content-state":{"title":"Build","progress":0.5},"stale-date":1700003600,"relevance-score":75}}"#)
    }

    @Test("end: dismissal-date defaults to now")
    func end() throws {
        let request = try fixedBuilder().liveActivity(.end, token: deviceToken, content: .init(contentState: state))
        #expect(body(request) == #"{"aps":{"timestamp":1700000000,"event":"end","content-state":{"title":"Build","progress":0.5},"dismissal-date":1700000000}}"#)
        let later = try fixedBuilder().liveActivity(.end, token: deviceToken, content: .init(dismissalDate: 1_700_000_900))
        #expect(body(later) == #"{"aps":{"timestamp":1700000000,"event":"end","dismissal-date":1700000900}}"#)
    }

    @Test("broadcast: /4/broadcasts path, channel header, no topic, expiration 0, request id")
    func broadcast() throws {
        let request = try fixedBuilder().broadcast(channelID: channel, content: .init(contentState: state), storagePolicy: .noStorage)
        #expect(request.operation == .broadcast)
        #expect(request.path == "/4/broadcasts/apps/com.example.app")
        #expect(request.header("apns-topic") == nil)
        #expect(headers(request) == [
            "apns-channel-id: \(channel)", "apns-push-type: liveactivity", "apns-priority: 5",
            "apns-expiration: 0", "apns-request-id: \(fixedID)",
        ])
        #expect(body(request) == #"{"aps":{"timestamp":1700000000,"event":"update","content-state":{"title":"Build","progress":0.5}}}"#)
    }

    @Test("channel management goes to the management host with exact paths and bodies")
    func channels() throws {
        let builder = try fixedBuilder()
        let create = builder.createChannel(storagePolicy: .mostRecentMessage)
        #expect(create.destination == .channelManagement)
        #expect(create.method == .POST)
        #expect(create.path == "/1/apps/com.example.app/channels")
        #expect(headers(create) == ["apns-request-id: \(fixedID)"])
        #expect(body(create) == #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#)
        #expect(body(builder.createChannel()) == #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)

        let list = builder.listChannels()
        #expect(list.method == .GET)
        #expect(list.path == "/1/apps/com.example.app/all-channels")
        #expect(list.body.isEmpty)

        let delete = try builder.deleteChannel(channelID: channel)
        #expect(delete.method == .DELETE)
        #expect(delete.path == "/1/apps/com.example.app/channels")
        #expect(headers(delete) == ["apns-channel-id: \(channel)", "apns-request-id: \(fixedID)"])
    }

    @Test("endpoints: Apple's hosts and ports per environment, overridable for tests")
    func endpoints() throws {
        let development = APNsEndpoints(environment: .development)
        #expect(development.send.description == "https://api.sandbox.push.apple.com:443")
        #expect(development.channelManagement.description == "https://api-manage-broadcast.sandbox.push.apple.com:2195")
        let production = APNsEndpoints(environment: .production, useAlternativePort: true)
        #expect(production.send.description == "https://api.push.apple.com:2197")
        #expect(production.channelManagement.description == "https://api-manage-broadcast.push.apple.com:2196")
        #expect(APNsEndpoints(environment: .production).send.authority == "api.push.apple.com")
        let mock = APNsEndpoints.overriding(send: Origin(host: "127.0.0.1", port: 8443))
        #expect(mock.channelManagement.description == "https://127.0.0.1:8443")
        #expect(Environment(name: "sandbox") == .development)
        #expect(Environment(name: "prod") == .production)
        #expect(Environment(name: "staging") == nil)
        // The canonical spellings (taken without lowercasing) and any case of every spelling.
        #expect(Environment(name: "development") == .development)
        #expect(Environment(name: "production") == .production)
        #expect(Environment(name: "Development") == .development)
        #expect(Environment(name: "PRODUCTION") == .production)
        #expect(Environment(name: "Dev") == .development)
        #expect(Environment(name: "developmentx") == nil)
        #expect(Environment(name: "") == nil)
    }

    @Test("describe shows method, origin, path, headers, payload and size, with no authorization")
    func describe() throws {
        let request = try fixedBuilder().liveActivity(.update, token: deviceToken, content: .init(contentState: state))
        let description = request.describe(endpoints: APNsEndpoints(environment: .production))
        #expect(description.byteCount == request.body.count)
        #expect(!description.headers.contains(where: { $0.name == "authorization" }))
        let json = description.json.encodedString()
        #expect(json.hasPrefix(#"{"operation":"update","method":"POST","origin":"https://api.push.apple.com:443","path":"/3/device/\#(deviceToken)","headers":{"apns-push-type":"liveactivity""#))
        #expect(json.hasSuffix(#""bytes":\#(request.body.count)}"#))
    }

    @Test("apns-ids are lowercase version 4 UUIDs")
    func apnsIDs() throws {
        var seen = Set<String>()
        for _ in 0..<500 {
            let id = APNsID.random().value
            #expect(id == id.lowercased())
            let parts = id.split(separator: "-").map(String.init)
            #expect(parts.map(\.count) == [8, 4, 4, 4, 12])
            #expect(parts[2].first == "4")
            #expect("89ab".contains(parts[3].first!))
            seen.insert(id)
        }
        #expect(seen.count == 500)
        #expect(APNsID("not-a-uuid") == nil)
        #expect(APNsID("0f9e8d7c-6b5a-4c3d-8e1f-a0b1c2d3e4f") == nil)
    }

    /// Hands out fixed values, in order.
    struct FixedRandom: RandomNumberGenerator {
        var values: [UInt64]
        mutating func next() -> UInt64 { values.removeFirst() }
    }

    @Test("an apns-id from two draws: each draw's bytes low first, the version and variant bits set (exact text, as before)")
    func apnsIDBytes() {
        // Expected strings written from the earlier code (a 16-byte array, then hex).
        let cases: [(UInt64, UInt64, String)] = [
            (0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210, "efcdab89-6745-4301-9032-547698badcfe"),
            (.max, 0, "ffffffff-ffff-4fff-8000-000000000000"),
            (0, .max, "00000000-0000-4000-bfff-ffffffffffff"),
        ]
        for (high, low, text) in cases {
            var generator = FixedRandom(values: [high, low])
            #expect(APNsID.random(using: &generator).value == text)
            #expect(generator.values.isEmpty)
        }
    }
}
