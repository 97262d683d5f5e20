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

    @Test("demo with a database writes one audit row per send there and answers the on-call queries from them")
    func demoWritesTheAudit() async throws {
        guard let url = ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let (status, output) = try await ProcessRunner.runOffPool(
            ["env", "APNS_RELAY_DATABASE_URL=\(database)", RelayProcess.binary, "demo", "--sends", "10"])
        #expect(status == 0, "\(output)")
        let summary = try #require(output.split(separator: "\n").first { $0.hasPrefix("audit: ") }, "\(output)")
        let written = try #require(Int(summary.split(separator: " ")[1]), "\(summary)")
        #expect(summary.contains("rows written to Postgres, 0 spooled, 0 dropped"), "\(summary)")
        #expect(written >= 10 + 5 + 5, "the plain, Unregistered and retried sends at least: \(summary)")
        let rows = try await ServeProcessTests.scalar(database, "SELECT count(*) FROM apns_audit WHERE relay_instance = 'demo'")
        #expect(rows == String(written), "the table holds what the demo says it wrote")
        let distinct = try await ServeProcessTests.scalar(database, "SELECT count(DISTINCT apns_id) FROM apns_audit")
        #expect(distinct == String(written), "one row per apns-id")
        for expected in ["$ apns-relay audit show ", "alert      success  200", "{MS015}", "$ apns-relay audit traps --since 1h",
                         "demo-app  MS020", "$ apns-relay audit dead-tokens --app demo-app", "Unregistered"] {
            #expect(output.contains(expected), "missing \(expected) in:\n\(output)")
        }
        let deadTokens = try await ServeProcessTests.scalar(database, "SELECT count(*) FROM apns_dead_tokens WHERE app = 'demo-app'")
        #expect(Int(deadTokens) ?? 0 >= 5, "every Unregistered token is its own dead token: \(deadTokens)")
    }

    @Test("demo --spool-only leaves the database alone and spools every row")
    func demoSpoolOnly() async throws {
        guard let url = ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let (status, output) = try await ProcessRunner.runOffPool(
            ["env", "APNS_RELAY_DATABASE_URL=\(database)", RelayProcess.binary, "demo", "--sends", "5", "--spool-only"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("audit: 0 rows written to Postgres"), "\(output)")
        #expect(output.contains("spool only:") && !output.contains("on-call queries"), "\(output)")
        let tables = try await ServeProcessTests.scalar(database, "SELECT count(*) FROM pg_tables WHERE tablename = 'apns_audit'")
        #expect(tables == "0", "not even migrated")
    }
}
