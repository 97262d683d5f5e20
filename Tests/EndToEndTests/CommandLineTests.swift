import Foundation
import Testing
import TestSupport

/// `apns-relay send` and `apns-relay demo`, run as a user would run them.
@Suite("apns-relay send and demo")
struct CommandLineTests {
    static func snapshotFile(in directory: String, _ text: String = TestRelay.liveSnapshot) throws -> String {
        let path = directory + "/snapshot-\(UUID().uuidString.prefix(6)).json"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("send alert reaches the mock and prints status, topic, push type, payload and APNs' answer")
    func sendAlert() async throws {
        try await withRelay { relay in
            let snapshot = try Self.snapshotFile(in: relay.directory)
            let common = [
                "--bundle-id", "com.example.a", "--key-id", "E2EKEY1234", "--team-id", "E2ETEAM123", "--key-path", relay.keyPath,
                "--origin", "127.0.0.1:\(relay.mock.port)", "--ca-file", relay.mock.certificateFile,
            ]
            let sent = try await ProcessRunner.runOffPool(
                [RelayProcess.binary, "send", "alert", "--token", TestRelay.token(5), "--snapshot-file", snapshot] + common)
            #expect(sent.status == 0, "\(sent.output)")
            #expect(sent.output.contains("push type: alert"))
            #expect(sent.output.contains("topic:     com.example.a"))
            #expect(sent.output.contains("payload:   {\"aps\""))
            #expect(sent.output.contains("answer:    200 apns-id "))
            #expect(relay.apnsRequests == 1)

            let described = try await ProcessRunner.runOffPool(
                [RelayProcess.binary, "send", "update", "--describe", "--token", TestRelay.token(6), "--snapshot-file", snapshot] + common)
            #expect(described.status == 0, "\(described.output)")
            #expect(described.output.contains("push type: liveactivity"))
            #expect(described.output.contains("com.example.a.push-type.liveactivity"))
            #expect(!described.output.contains("answer:"))
            #expect(relay.apnsRequests == 1, "--describe sends nothing")

            let refused = try await ProcessRunner.runOffPool(
                [RelayProcess.binary, "send", "alert", "--token", "not-a-token", "--snapshot-file", snapshot] + common)
            #expect(refused.status != 0)
            #expect(refused.output.contains("BadDeviceToken") && refused.output.contains("fix:"), "\(refused.output)")
            #expect(relay.apnsRequests == 1)
        }
    }

    @Test("send channel-create then channel-list, against the mock's channel store")
    func sendChannels() async throws {
        try await withRelay { relay in
            let common = [
                "--bundle-id", "com.example.a", "--key-id", "E2EKEY1234", "--team-id", "E2ETEAM123", "--key-path", relay.keyPath,
                "--origin", "127.0.0.1:\(relay.mock.port)", "--ca-file", relay.mock.certificateFile,
            ]
            let created = try await ProcessRunner.runOffPool([RelayProcess.binary, "send", "channel-create"] + common)
            #expect(created.status == 0, "\(created.output)")
            let channel = try #require(created.output.split(separator: "\n").first { $0.hasPrefix("channel:") }?.split(separator: " ").last)
            let listed = try await ProcessRunner.runOffPool([RelayProcess.binary, "send", "channel-list"] + common)
            #expect(listed.output.contains(String(channel)), "\(listed.output)")
        }
    }

    @Test("demo runs the mixed workload end to end and exits 0")
    func demo() async throws {
        let (status, output) = try await ProcessRunner.runOffPool([RelayProcess.binary, "demo", "--sends", "40"])
        #expect(status == 0, "\(output)")
        for expected in ["alert                200×40", "unregistered         410×20", "too-many-requests    200×20", "payload-too-large    413×1",
                         "invalid-snapshot     400×1", "channel-create       201×1", "broadcast            200×1", "retries: 40", "MS015×20"] {
            #expect(output.contains(expected), "missing \(expected) in:\n\(output)")
        }
        #expect(output.contains("0 dropped"))
    }
}
