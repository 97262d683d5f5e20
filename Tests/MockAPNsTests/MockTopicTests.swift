import MockAPNs
import Testing
import RelayBasics

/// The topic each push type must carry, as Apple documents it ("Sending
/// notification requests to APNs", apns-topic): restated here, not read from
/// the mock's table, so a wrong entry there fails these tests.
@Suite("Mock APNs: topics per push type")
struct MockTopicTests {
    static let topics: [(String, String)] = [
        ("alert", bundle), ("background", bundle),
        ("liveactivity", bundle + ".push-type.liveactivity"), ("widgets", bundle + ".push-type.widgets"),
        ("voip", bundle + ".voip"), ("complication", bundle + ".complication"),
        ("fileprovider", bundle + ".pushkit.fileprovider"), ("location", bundle + ".location-query"),
        ("pushtotalk", bundle + ".voip-ptt"),
    ]

    /// A mock that knows `bundleIDs` (none: it accepts any bundle id), made
    /// once per test: a fixture signs with keys of its own, which takes a while.
    static func mock(_ bundleIDs: Set<String>) throws -> MockFixture { try MockFixture { $0.bundleIDs = bundleIDs } }

    static func send(_ pushType: String, topic: String, to mock: MockFixture) -> (status: Int, reason: String?) {
        let body = pushType == "widgets" ? #"{"aps":{"content-changed":true}}"# : #"{"aps":{"alert":"hi"}}"#
        return answer(mock.send(headers: [HTTPHeader("apns-push-type", pushType), HTTPHeader("apns-topic", topic)], body: body))
    }

    @Test("each push type is accepted on its own topic, with the bundle id configured or any accepted", arguments: topics)
    func ownTopic(_ pushType: String, _ topic: String) throws {
        for bundleIDs in [[bundle], []] as [Set<String>] {
            let got = Self.send(pushType, topic: topic, to: try Self.mock(bundleIDs))
            #expect(got.status == 200 && got.reason == nil, "\(pushType) on \(topic), bundle ids \(bundleIDs): \(got)")
        }
    }

    @Test("each push type on another push type's topic is TopicDisallowed", arguments: topics)
    func otherTopics(_ pushType: String, _ ownTopic: String) throws {
        for bundleIDs in [[bundle], []] as [Set<String>] {
            let mock = try Self.mock(bundleIDs)
            for (_, topic) in Self.topics where topic != ownTopic {
                let got = Self.send(pushType, topic: topic, to: mock)
                #expect(got.status == 400 && got.reason == "TopicDisallowed", "\(pushType) on \(topic), bundle ids \(bundleIDs): \(got)")
            }
        }
    }

    @Test("a push type's suffix on another app's bundle id is TopicDisallowed when the mock knows its bundle ids", arguments: topics)
    func otherApp(_ pushType: String, _ topic: String) throws {
        let other = "com.example.other" + topic.dropFirst(bundle.count)
        let got = Self.send(pushType, topic: other, to: try Self.mock([bundle]))
        #expect(got.status == 400 && got.reason == "TopicDisallowed", "\(pushType) on \(other): \(got)")
    }
}
