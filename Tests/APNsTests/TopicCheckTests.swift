import APNs
import Testing

/// `Preflight.checkTopic` decides a topic by comparing bytes (no set of
/// allowed topics built per send); its verdicts must be the set's.
@Suite("Preflight: topic check")
struct TopicCheckTests {
    @Test("checkTopic passes exactly the topics allowedTopics(forBundleID:) lists, for every push type's suffix and near misses")
    func agreesWithTheSet() {
        let bundleID = "com.example.checkout"
        let allowed = Preflight.allowedTopics(forBundleID: bundleID)
        var topics = Array(allowed)
        for topic in allowed {
            topics += [topic + "x", String(topic.dropLast()), topic + ".", topic.uppercased(), "x" + topic]
        }
        topics += ["com.example", "com.example.checkou", "com.example.other", "com.example.checkout.push-type", "com.example.checkout.voip.voip",
                   "com.example.checkout-voip", "org.example.checkout"]
        for topic in topics {
            let passes = (try? Preflight.checkTopic(topic, bundleID: bundleID)) != nil
            #expect(passes == allowed.contains(topic), "\(topic)")
        }
        #expect(topics.filter { (try? Preflight.checkTopic($0, bundleID: bundleID)) != nil }.count == allowed.count)
    }

    @Test("a topic of another app is refused naming apns-topic, with the rule")
    func otherApp() {
        #expect(throws: APNsError.self) { try Preflight.checkTopic("com.example.other.voip", bundleID: "com.example.checkout") }
        do {
            try Preflight.checkTopic("com.example.other", bundleID: "com.example.checkout")
        } catch {
            #expect(error.description.contains("apns-topic"), "\(error)")
            #expect(error.description.contains("com.example.checkout"), "\(error)")
        }
    }
}
