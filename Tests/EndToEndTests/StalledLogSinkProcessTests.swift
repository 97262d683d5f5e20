import Foundation
import RelayJSON
import Synchronization
import Testing
import TestSupport

/// `serve` with its standard error in a pipe a stalled log collector holds:
/// logging never stops a send, a probe or the drain (issue 26).
@Suite("serve with a stalled log sink", .serialized)
struct StalledLogSinkProcessTests {
    static let sends = 10_000
    static let perBatch = 1_000
    static let drainTimeout = 5

    /// The test's end of the pipe: reads nothing until told to, or 1 KB a
    /// second, then everything once the relay was signalled.
    final class Collector: Sendable {
        enum Pace: Sendable { case never, slow }
        private let handle: FileHandle
        private let state = Mutex<(bytes: [UInt8], fast: Bool, eof: Bool)>(([], false, false))

        init(_ handle: FileHandle, pace: Pace) {
            self.handle = handle
            guard pace == .slow else { return }
            Thread.detachNewThread { [self] in
                while true {
                    let fast = state.withLock { $0.fast }
                    let chunk = (try? handle.read(upToCount: fast ? 65536 : 1024)) ?? Data()
                    if chunk.isEmpty { state.withLock { $0.eof = true }; return }
                    state.withLock { $0.bytes += chunk }
                    // About 1 KB/s: the pacing only, never a verdict.
                    if !fast { Thread.sleep(forTimeInterval: 1) }
                }
            }
        }

        /// From now on read as fast as the pipe gives (`.slow`): the log collector recovered.
        func readFast() { state.withLock { $0.fast = true } }

        /// Reads what the pipe holds, to EOF (`.never`, after the exit).
        func readToEOFNow() {
            let rest = (try? handle.readToEnd()) ?? Data()
            state.withLock { $0.bytes += rest; $0.eof = true }
        }

        var atEOF: Bool { state.withLock { $0.eof } }
        var text: String { state.withLock { String(decoding: $0.bytes, as: UTF8.self) } }
    }

    @Test("standard error into a pipe nobody reads: 10,000 sends all answered, /healthz answers throughout, dropped lines counted; SIGTERM ends serve within drain timeout + 10 s + the log's 5 s with every audit row written; what reached the pipe is whole lines")
    func neverRead() async throws {
        try await run(.never)
    }

    @Test("standard error read at about 1 KB/s: 10,000 sends all answered, /healthz answers throughout; every line the relay produced is written or counted as dropped (the closing line's totals, the drop reports and the lines read agree)")
    func readSlowly() async throws {
        try await run(.slow)
    }

    private func run(_ pace: Collector.Pace) async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let database = try await ServeProcessTests.freshDatabase(url)
        let relay = try await TestRelay.start()
        defer { Task { await relay.stop() } }
        let instance = "stalled-\(pace)-\(UUID().uuidString.prefix(6))"
        let config = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: instance, databaseURL: database,
            spool: relay.directory + "/spool-stalled-\(pace)")
        let yaml = try String(contentsOfFile: config, encoding: .utf8)
            .replacingOccurrences(of: "drain_timeout_seconds: 20", with: "drain_timeout_seconds: \(Self.drainTimeout)")
            .replacingOccurrences(of: "ingress:\n  listen: 127.0.0.1:0", with: "ingress:\n  listen: 127.0.0.1:0\n  batch_deadline_seconds: 300")
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)

        let serve = try RelayProcess(arguments: ["serve", "--config", config], standardErrorPipe: true)
        let collector = Collector(try #require(serve.standardErrorReader), pace: pace)
        let base = "http://127.0.0.1:\(try await serve.port(after: "apns-relay ingress on"))"
        let metrics = "http://127.0.0.1:\(try await serve.port(after: "apns-relay metrics on"))"

        var succeeded = 0
        for batch in 0..<(Self.sends / Self.perBatch) {
            let running = Task { try await relay.curl("POST", "/v1/send/batch", body: ServeProcessTests.batch(Self.perBatch, offset: batch * Self.perBatch), base: base) }
            // The probe answers while the batch runs and the log sink takes nothing.
            let probe = try await relay.curl("GET", "/healthz", key: nil, base: metrics)
            #expect(probe.status == 200, "/healthz during batch \(batch): \(probe)")
            let answer = try await running.value
            #expect(answer.status == 200, "\(answer.description.prefix(300))")
            succeeded += Int(answer.json?["summary"]?["succeeded"]?.integerValue ?? 0)
        }
        #expect(succeeded == Self.sends, "every send answered and sent")

        let scrape = try await relay.curl("GET", "/metrics", key: nil, base: metrics)
        let droppedBefore = try #require(Self.value(of: "apns_relay_log_lines_dropped_total", in: scrape.body), "\(scrape.body.prefix(200))")
        #expect(droppedBefore > 0, "a stalled sink drops lines, and they are counted")

        // SIGTERM: within drain timeout + the drain's 10 s margin + the log's 5 s (and start-up slack).
        if pace == .slow { collector.readFast() }
        serve.signal(SIGTERM)
        let status = await serve.waitForExit(timeout: Double(Self.drainTimeout + 10 + 5 + 30))
        #expect(status == 0, "serve ended after SIGTERM with exit 0 (got \(String(describing: status)))")
        let rows = try await ServeProcessTests.scalar(
            database, "SELECT count(*), count(DISTINCT apns_id) FROM apns_audit WHERE relay_instance = '\(instance)'")
        #expect(rows == "\(Self.sends)|\(Self.sends)", "one audit row per send")

        if pace == .never { collector.readToEOFNow() } else { #expect(await eventually(60) { collector.atEOF }) }
        let text = collector.text
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // What follows the last newline is the line the relay gave up on at exit, if any (counted as dropped).
        let fragment = lines.removeLast()
        var sendLines = 0, reported = 0, written = 0
        var closing: JSONValue?
        for line in lines {
            let json = try #require(try? JSONParser.parse(line), "a whole JSON line: \(line.prefix(200))")
            switch json["msg"]?.stringValue {
            case "log lines dropped: the log sink took nothing while the buffer was full":
                reported += Int(json["dropped"]?.integerValue ?? 0)
            case "log sink closed":
                closing = json
            case "send finished":
                sendLines += 1
                written += 1
            default:
                written += 1
            }
        }
        #expect(sendLines < Self.sends, "the stalled sink took only part of the sends' lines")
        if pace == .slow {
            #expect(fragment.isEmpty, "the last line is whole")
            // Every send's line was produced before the scrape: written (and read), or dropped and counted.
            #expect(sendLines + droppedBefore >= Self.sends, "the sends' lines not written were counted")
        } else {
            // Given up at exit: whole lines, then at most the start of the line given up on.
            #expect(fragment.isEmpty || fragment.hasPrefix(#"{"ts":""#), "\(fragment.prefix(80))")
        }
        // The closing line comes when the sink took everything (read slowly), or had room for it when the
        // buffer was given up on at a line's end (never read); never after a line given up on halfway.
        if pace == .slow || closing != nil {
            #expect(fragment.isEmpty)
            let closing = try #require(closing, "the closing line with the log's totals")
            let produced = Int(closing["lines_produced"]?.integerValue ?? -1)
            let linesWritten = Int(closing["lines_written"]?.integerValue ?? -1)
            let linesDropped = Int(closing["lines_dropped"]?.integerValue ?? -1)
            #expect(linesWritten == written, "every line written was read")
            #expect(linesWritten + linesDropped == produced, "lines written + dropped = lines produced")
            #expect(linesDropped >= droppedBefore, "the counter never ran ahead of the log")
            #expect(produced >= Self.sends, "a line per send at least")
            if pace == .slow { #expect(linesDropped == reported, "every drop reported once the sink took lines again") }
        }
    }

    static func value(of metric: String, in exposition: String) -> Int? {
        exposition.split(separator: "\n").first { $0.hasPrefix(metric + " ") }
            .flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) }
    }
}
