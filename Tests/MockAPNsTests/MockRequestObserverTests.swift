import MockAPNs
import RelayBasics
import Synchronization
import Testing

/// `MockAPNsConfiguration.requestObserver` is what `mock-apns --request-log`
/// writes from, and scripts/fuzz counts APNs requests per key and token
/// from that log: every request must reach it once, as it was answered.
@Suite("Mock APNs request observer")
struct MockRequestObserverTests {
    @Test("every request reaches the observer once, in order, with its apns-id, path, body and answer")
    func observesEveryRequest() throws {
        let seen = Mutex<[MockAPNsLog.Entry]>([])
        let mock = try MockFixture { $0.requestObserver = { entry in seen.withLock { $0.append(entry) } } }
        let id = "5b0e7a34-3c39-4a39-9d3c-2f1b2c0e1a77"
        _ = mock.send(headers: [HTTPHeader("apns-push-type", "alert"), HTTPHeader("apns-topic", bundle), HTTPHeader("apns-id", id)],
                      body: #"{"aps":{"alert":"marker-1"}}"#)
        _ = mock.send(path: "/3/device/zz", body: #"{"aps":{"alert":"marker-2"}}"#)

        let entries = seen.withLock { $0 }
        try #require(entries.count == 2, "\(entries)")
        #expect(entries[0].apnsID == id && entries[0].status == 200)
        #expect(entries[0].request.path == "/3/device/\(token64)")
        #expect(String(decoding: entries[0].request.body, as: UTF8.self).contains("marker-1"))
        #expect(entries[1].status == 400 && entries[1].reason == "BadDeviceToken", "\(entries[1])")
        #expect(mock.engine.log.total == entries.count)
    }
}
