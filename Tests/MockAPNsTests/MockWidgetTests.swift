import MockAPNs
import Testing
import RelayBasics

@Suite("Mock APNs: the widgets push type")
struct MockWidgetTests {
    static let reload = #"{"aps":{"content-changed":true}}"#

    func send(_ pushType: String, topic: String, body: String = reload, bundleIDs: Set<String>? = nil) throws -> (Int, String?) {
        let mock = try MockFixture { configuration in
            if let bundleIDs { configuration.bundleIDs = bundleIDs }
        }
        return answer(mock.send(headers: [HTTPHeader("apns-push-type", pushType), HTTPHeader("apns-topic", topic)], body: body))
    }

    @Test("a reload on <bundle>.push-type.widgets is accepted, with or without a sidecar beside aps")
    func accepted() throws {
        #expect(try send("widgets", topic: bundle + ".push-type.widgets") == (200, nil))
        #expect(try send("widgets", topic: bundle + ".push-type.widgets", body: #"{"aps":{"content-changed":true},"liveSurface":{"kind":"surface_reload"}}"#) == (200, nil))
    }

    @Test("a widgets push on a topic without the widgets suffix is TopicDisallowed")
    func unsuffixed() throws {
        #expect(try send("widgets", topic: bundle) == (400, "TopicDisallowed"))
        #expect(try send("widgets", topic: bundle + ".push-type.liveactivity") == (400, "TopicDisallowed"))
    }

    @Test("a widgets topic is no other push type's topic, even for a mock that knows no bundle ids")
    func foreignSuffix() throws {
        for (pushType, topic) in [
            ("alert", bundle + ".push-type.widgets"), ("background", bundle + ".push-type.widgets"),
            ("widgets", bundle + ".push-type.liveactivity.push-type.widgets"), ("widgets", bundle + ".push-type.widgets.push-type.widgets"),
        ] {
            #expect(try send(pushType, topic: topic, bundleIDs: []) == (400, "TopicDisallowed"), "\(pushType) \(topic)")
        }
        #expect(try send("widgets", topic: bundle + ".push-type.widgets", bundleIDs: []) == (200, nil))
    }

    @Test("a widgets payload over 4096 bytes is PayloadTooLarge, and an unknown push type InvalidPushType")
    func limits() throws {
        let padding = String(repeating: "x", count: 4097 - #"{"aps":{"content-changed":true},"p":""}"#.utf8.count)
        #expect(try send("widgets", topic: bundle + ".push-type.widgets", body: #"{"aps":{"content-changed":true},"p":"\#(padding)"}"#) == (413, "PayloadTooLarge"))
        #expect(try send("widget", topic: bundle + ".push-type.widgets") == (400, "InvalidPushType"))
    }
}
