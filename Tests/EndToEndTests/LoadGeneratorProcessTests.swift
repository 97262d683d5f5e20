import Foundation
import RelayJSON
import Synchronization
import Testing
import TestSupport

/// `apns-relay bench load` against an independent HTTP/1.1 server (Python's
/// http.server, scripts/lib/load_peer.py) that fails, drops and closes by the
/// token numbers it is sent: the generator's `load:` line must count exactly
/// the sends and requests the peer's rules make succeed or fail, send every
/// token once, and survive connections the peer closes.
@Suite("The built-in load generator's counting")
struct LoadGeneratorProcessTests {
    static let apiKey = "load-peer-key-0123456789"

    /// The Python peer as a child process.
    final class Peer: Sendable {
        let child: ChildProcess
        let port: UInt16

        init() async throws {
            (child, port) = try await startListeningScript(
                "load_peer.py", [LoadGeneratorProcessTests.apiKey], portAfter: "load-peer on ", failure: "the load peer did not start")
        }

        /// What the peer saw: GET /stats through curl.
        func stats() throws -> JSONObject {
            let (status, output) = try ProcessRunner.run(["curl", "-sS", "--max-time", "30", "http://127.0.0.1:\(port)/stats"])
            guard status == 0, let object = try JSONParser.parse(output).objectValue else { throw TestRelayError("GET /stats: \(output)") }
            return object
        }

        func stop() async {
            child.terminate()
            _ = await child.exited()
        }
    }

    /// Runs the generator and returns its `load:` line's fields.
    static func load(port: UInt16, _ arguments: [String]) throws -> [String: Double] {
        let outcome = try ProcessRunner.capture(
            [RelayProcess.binary, "bench", "load", "--port", String(port), "--api-key", apiKey, "--app", "app-a"] + arguments)
        let output = String(decoding: outcome.standardOutput, as: UTF8.self)
        #expect(outcome.status == 0, "bench load: \(output) \(String(decoding: outcome.standardError, as: UTF8.self))")
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("load: ") }) else { throw TestRelayError("no load line: \(output)") }
        var fields: [String: Double] = [:]
        for field in line.dropFirst(6).split(separator: " ") {
            let pair = field.split(separator: "=")
            if pair.count == 2 { fields[String(pair[0])] = Double(pair[1]) }
        }
        return fields
    }

    @Test("single sends: failed answers counted as failed requests, dropped and closed connections survived, every token once")
    func singleSends() async throws {
        let peer = try await Peer()
        let (sends, offset) = (700, 1000)
        let fields = try Self.load(port: peer.port, ["--connections", "4", "--sends", String(sends), "--token-offset", String(offset)])
        let stats = try peer.stats()
        await peer.stop()
        let numbers = (offset + 1)...(offset + sends)
        let failing = numbers.filter { $0 % 5 == 0 }.count
        #expect(fields["requests"] == Double(sends))
        #expect(fields["sends"] == Double(sends))
        #expect(fields["failed_requests"] == Double(failing))
        #expect(fields["succeeded"] == Double(sends - failing))
        #expect(stats["requests"]?.integerValue == Int64(sends + numbers.filter { $0 % 11 == 0 }.count), "each dropped send sent again once")
        #expect(stats["dropped"]?.integerValue == Int64(numbers.filter { $0 % 11 == 0 }.count))
        #expect(stats["tokens"]?.integerValue == Int64(sends))
        #expect(stats["duplicates"]?.integerValue == 0)
        #expect(stats["problems"]?.arrayValue?.isEmpty == true, "\(String(describing: stats["problems"]))")
    }

    @Test("batches: a failed batch counts as one failed request, the summary's succeeded and each result's latency are read")
    func batches() async throws {
        let peer = try await Peer()
        let (sends, batch, offset) = (240, 20, 5000)
        let fields = try Self.load(
            port: peer.port, ["--connections", "3", "--sends", String(sends), "--batch-size", String(batch), "--token-offset", String(offset)])
        let stats = try peer.stats()
        await peer.stop()
        let firsts = Array(stride(from: offset + 1, to: offset + 1 + sends, by: batch))
        let answered = firsts.filter { $0 % 3 != 0 }
        let succeeded = answered.reduce(0) { total, first in total + (first..<(first + batch)).filter { $0 % 7 != 0 }.count }
        #expect(fields["requests"] == Double(sends / batch))
        #expect(fields["sends"] == Double(sends))
        #expect(fields["failed_requests"] == Double(firsts.count - answered.count))
        #expect(fields["succeeded"] == Double(succeeded))
        #expect(fields["send_p50_ms"] == 2.5)
        #expect(fields["send_p99_ms"] == 2.5)
        #expect(stats["tokens"]?.integerValue == Int64(sends))
        #expect(stats["duplicates"]?.integerValue == 0)
        #expect(stats["problems"]?.arrayValue?.isEmpty == true, "\(String(describing: stats["problems"]))")
    }
}
