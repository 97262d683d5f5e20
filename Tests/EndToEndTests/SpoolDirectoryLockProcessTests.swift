import Foundation
import Testing
import TestSupport

/// One relay per spool directory, as an operator meets it: a second `serve`
/// on a directory a running one holds exits at start, saying why, and
/// leaves the first serving; a relay killed with SIGKILL leaves no lock.
@Suite("serve: one relay per spool directory")
struct SpoolDirectoryLockProcessTests {
    @Test("a second serve on the same spool directory exits 1 at start naming the directory and the setting; the first keeps serving; after the first is SIGKILLed a new one starts on it")
    func secondServeRefused() async throws {
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let spool = relay.directory + "/spool-shared"
        func configuration(_ instance: String) throws -> String {
            try ServeProcessTests.writeConfiguration(
                directory: relay.directory + "/" + instance, mock: relay.mock, keyPath: relay.keyPath, instance: instance, databaseURL: "",
                spool: spool)
        }
        for instance in ["lock-a", "lock-b", "lock-c"] {
            try FileManager.default.createDirectory(atPath: relay.directory + "/" + instance, withIntermediateDirectories: true)
        }
        let first = try RelayProcess(arguments: ["serve", "--config", try configuration("lock-a")], standardError: relay.directory + "/lock-a.err")
        defer { first.signal(SIGKILL) }
        let port = try await first.port(after: "apns-relay ingress on")

        let secondLog = relay.directory + "/lock-b.err"
        let second = try RelayProcess(arguments: ["serve", "--config", try configuration("lock-b")], standardError: secondLog)
        defer { second.signal(SIGKILL) }
        #expect(await second.waitForExit() == 1, "the second serve must not run on the held directory")
        let log = (try? String(contentsOfFile: secondLog, encoding: .utf8)) ?? ""
        #expect(log.contains("is in use by another apns-relay") && log.contains(spool) && log.contains("audit.spool_directory"), "\(log.suffix(1500))")
        #expect(!second.output.contains { $0.hasPrefix("apns-relay ingress on") }, "it never listened")

        // The first is untouched: it still sends.
        let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(7)), base: "http://127.0.0.1:\(port)")
        #expect(answer.status == 200, "\(answer)")

        // A killed relay's lock goes with its process.
        first.signal(SIGKILL)
        #expect(await first.waitForExit() != 0)
        let third = try RelayProcess(arguments: ["serve", "--config", try configuration("lock-c")], standardError: relay.directory + "/lock-c.err")
        defer { third.signal(SIGKILL) }
        _ = try await third.port(after: "apns-relay ingress on")
        third.signal(SIGTERM)
        #expect(await third.waitForExit() == 0)
    }
}
