import Foundation
import Testing
import TestSupport

/// `serve` started with standard output or standard error closed (`2>&-`, a
/// supervisor that closes them). The numbers went to the first descriptors
/// the relay opened (Dispatch's epoll), and writing the port lines to one
/// ended `serve` with a crash at start. A constructor now reopens them on
/// /dev/null before anything runs. And standard output whose reader has gone
/// (`serve | head -1`): Foundation's write trapped on EPIPE at the second
/// port line.
@Suite("serve with a standard descriptor closed")
struct ClosedStandardDescriptorsProcessTests {
    /// What the child's descriptor `number` is (readlink of /proc/PID/fd/N).
    static func descriptor(_ number: Int32, of pid: Int32) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(number)")
    }

    @Test("standard error closed: serve runs on /dev/null there, answers and audits a send, and drains with exit 0")
    func standardErrorClosed() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let instance = "closed-stderr-\(UUID().uuidString.prefix(6))"
        let config = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: instance, databaseURL: database,
            spool: relay.directory + "/spool-closed-stderr")
        let serve = try RelayProcess(arguments: ["serve", "--config", config], closing: [2])
        let port = try await serve.port(after: "apns-relay ingress on")
        #expect(Self.descriptor(2, of: serve.pid) == "/dev/null")
        let body = #"{"app":"app-a","environment":"development","operation":"alert","token":"\#(TestRelay.token(1))","snapshot":\#(TestRelay.liveSnapshot)}"#
        let answer = try await relay.curl("POST", "/v1/send", body: body, base: "http://127.0.0.1:\(port)")
        #expect(answer.status == 200, "\(answer)")
        serve.signal(SIGTERM)
        #expect(await serve.waitForExit() == 0)
        #expect(try await ServeProcessTests.scalar(database, "SELECT count(*) FROM apns_audit WHERE relay_instance = '\(instance)'") == "1")
    }

    @Test("standard output and standard error closed: serve starts (its port lines go to /dev/null), answers /healthz, and drains with exit 0")
    func bothClosed() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let config = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: "closed-both-\(UUID().uuidString.prefix(6))",
            databaseURL: database, spool: relay.directory + "/spool-closed-both")
        // No port line to read: the metrics listener gets a port chosen here.
        let metricsPort = try await HAProxyBalancer.freePort()
        let yaml = try String(contentsOfFile: config, encoding: .utf8)
            .replacingOccurrences(of: "metrics:\n  listen: 127.0.0.1:0", with: "metrics:\n  listen: 127.0.0.1:\(metricsPort)")
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        let serve = try RelayProcess(arguments: ["serve", "--config", config], closing: [1, 2])
        let healthy = await eventually(60) {
            guard serve.exitStatus == nil else { return true }
            return (try? await relay.curl("GET", "/healthz", key: nil, base: "http://127.0.0.1:\(metricsPort)"))?.status == 200
        }
        #expect(healthy && serve.exitStatus == nil, "serve is up and answers /healthz (exit status \(String(describing: serve.exitStatus)))")
        #expect(Self.descriptor(1, of: serve.pid) == "/dev/null")
        #expect(Self.descriptor(2, of: serve.pid) == "/dev/null")
        serve.signal(SIGTERM)
        #expect(await serve.waitForExit() == 0)
    }

    @Test("standard output a pipe whose reader is gone (serve | head -1): serve keeps running, says on standard error that the port lines were not taken, answers and audits a send, and drains with exit 0")
    func outputReaderGone() async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let instance = "gone-stdout-\(UUID().uuidString.prefix(6))"
        let config = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: instance, databaseURL: database,
            spool: relay.directory + "/spool-gone-stdout")
        // No port line to read: both listeners get ports chosen here.
        let (ingressPort, metricsPort) = (try await HAProxyBalancer.freePort(), try await HAProxyBalancer.freePort())
        let yaml = try String(contentsOfFile: config, encoding: .utf8)
            .replacingOccurrences(of: "ingress:\n  listen: 127.0.0.1:0", with: "ingress:\n  listen: 127.0.0.1:\(ingressPort)")
            .replacingOccurrences(of: "metrics:\n  listen: 127.0.0.1:0", with: "metrics:\n  listen: 127.0.0.1:\(metricsPort)")
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        let log = relay.directory + "/gone-stdout.log"
        let serve = try RelayProcess(arguments: ["serve", "--config", config], standardError: log, outputReaderGone: true)
        let warned = await eventually(60) {
            serve.exitStatus != nil || ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("did not take the port lines")
        }
        #expect(warned && serve.exitStatus == nil, "serve is up and said so (exit status \(String(describing: serve.exitStatus)))")
        let body = #"{"app":"app-a","environment":"development","operation":"alert","token":"\#(TestRelay.token(1))","snapshot":\#(TestRelay.liveSnapshot)}"#
        let answer = try await relay.curl("POST", "/v1/send", body: body, base: "http://127.0.0.1:\(ingressPort)")
        #expect(answer.status == 200, "\(answer)")
        #expect(try await relay.curl("GET", "/healthz", key: nil, base: "http://127.0.0.1:\(metricsPort)").status == 200)
        serve.signal(SIGTERM)
        #expect(await serve.waitForExit() == 0)
        #expect(try await ServeProcessTests.scalar(database, "SELECT count(*) FROM apns_audit WHERE relay_instance = '\(instance)'") == "1")
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        #expect(lines.contains { $0.contains("did not take the port lines") && $0.contains(#""lines_not_written":"2""#) }, "\(lines.suffix(3))")
    }
}
