import ArgumentParser
import Foundation
import Logging
import Relay
import RelayBasics
import RelayJSON
import Telemetry

/// `apns-relay bench log-line`: what one log line costs the thread that logs it.
struct LogLineBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log-line",
        abstract: "Nanoseconds per JSON log line (a send's `send finished` line), against references measured in the same run.",
        discussion: """
            Logs the line a send writes at info (`send finished`: apns-id, app, operation, outcome, status, \
            attempts, latency, trace and span ids) --lines times through swift-log and JSONLogHandler: \
            (1) encoded only (a sink that discards), (2) the whole path into the bounded buffer that the drain \
            thread writes to /dev/null. References, same run, same metadata: (a) the encoding the handler used \
            before issue 26 (merge the metadata into a dictionary, sort it, build a JSONValue, encode it), \
            (b) a bare copy of the line's bytes into a buffer. Then the send's own two ways, the metadata or \
            fields built for every line as a send builds them: (3) a `Logger.Metadata` dictionary through swift-log \
            (the send's path before), (4) fields sorted by key on the stack, straight to the handler \
            (`SortedFieldsLogging`, the send's path now), encoded only and into the buffer. Prints ns per line of \
            each and the ratios (target: a few µs per line).
            """)

    @Option(help: "Lines per measurement.") var lines = 200_000

    func run() throws {
        let metadata: Logger.Metadata = [
            "apns_id": "6B3D4C39-6E3A-4A52-9C4E-5A0B7B3F7E21", "app": "checkout-ios", "operation": "alert",
            "outcome": "success", "attempts": "1", "latency_ms": "12.345", "status": "200",
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7",
        ]
        let discard = LogSink { _ in }
        let encoded = Logger(label: "apns-relay") { JSONLogHandler(label: $0, sink: discard, level: .info, metadataProvider: nil) }
        guard let devNull = FileHandle(forWritingAtPath: "/dev/null") else { throw ValidationError("cannot open /dev/null") }
        let buffered = LogSink(fileDescriptor: devNull.fileDescriptor)
        let whole = Logger(label: "apns-relay") { JSONLogHandler(label: $0, sink: buffered, level: .info, metadataProvider: nil) }

        var sample: [UInt8] = []
        LogLineEncoder.encode(
            timestamp: RFC3339.format(nanoseconds: UnixTime.nowNanoseconds()), level: .info, label: "apns-relay",
            message: "send finished", handler: [:], provided: nil, event: metadata, into: &sample)

        let count = lines
        func measure(_ body: () -> Void) -> Double {
            for _ in 0..<min(count, 10_000) { body() }  // warm-up
            let start = MonotonicClock.now()
            for _ in 0..<count { body() }
            return Double(MonotonicClock.now() - start) / Double(count)
        }
        let newEncode = measure { encoded.info("send finished", metadata: metadata) }
        let newWhole = measure { whole.info("send finished", metadata: metadata) }
        let oldEncode = measure { _ = Self.oldEncoding(label: "apns-relay", message: "send finished", metadata: metadata) }
        var target: [UInt8] = []
        target.reserveCapacity(sample.count * 64)
        let copy = measure {
            if target.count > sample.count * 63 { target.removeAll(keepingCapacity: true) }
            target.append(contentsOf: sample)
        }
        // The send's ways, its metadata or fields built for every line.
        let values = metadata.mapValues { value -> String in
            if case .string(let text) = value { return text }
            return ""
        }
        let sortedKeys: [StaticString] = ["apns_id", "app", "attempts", "latency_ms", "operation", "outcome", "span_id", "status", "trace_id"]
        let sortedValues = sortedKeys.map { values[$0.description]! }
        // Each as the send has it: values at hand, keys written in the code.
        let pairs = sortedKeys.indices.map { (sortedKeys[$0].description, sortedValues[$0]) }
        let dictionaryPerLine = measure {
            var perLine = Logger.Metadata(minimumCapacity: 12)
            for (key, value) in pairs { perLine[key] = .string(value) }
            encoded.info("send finished", metadata: perLine)
        }
        let discarding = JSONLogHandler(label: "apns-relay", sink: discard, level: .info, metadataProvider: nil)
        let buffering = JSONLogHandler(label: "apns-relay", sink: buffered, level: .info, metadataProvider: nil)
        func sortedFields(_ handler: JSONLogHandler) -> () -> Void {
            return {
                withUnsafeTemporaryAllocation(of: LogField.self, capacity: 9) { storage in
                    // As a send writes them: one at a time onto the stack, in key order.
                    var count = 0
                    for index in sortedKeys.indices {
                        storage.initializeElement(at: count, to: LogField(sortedKeys[index], sortedValues[index]))
                        count += 1
                    }
                    handler.log(level: .info, message: "send finished", sortedFields: UnsafeBufferPointer(rebasing: storage[..<count]))
                    _ = storage.baseAddress!.deinitialize(count: count)
                }
            }
        }
        let sortedEncode = measure(sortedFields(discarding))
        let sortedWhole = measure(sortedFields(buffering))
        buffered.flush(within: 5)
        print("one `send finished` line, \(sample.count) bytes, \(count) lines per measurement")
        print(String(format: "  JSONLogHandler, encode only:            %7.0f ns/line", newEncode))
        print(String(format: "  JSONLogHandler, into the log buffer:    %7.0f ns/line (%.1f µs; target: a few µs)", newWhole, newWhole / 1000))
        print(String(format: "  reference, the JSONValue path (before): %7.0f ns/line (now %.2f× of it)", oldEncode, newWhole / oldEncode))
        print(String(format: "  reference, a bare copy of the bytes:    %7.0f ns/line", copy))
        print(String(format: "  the send's way before, a dictionary built per line, encode only: %7.0f ns/line", dictionaryPerLine))
        print(String(format: "  the send's way now, sorted fields, encode only:                %7.0f ns/line (%.2f× of the dictionary's)", sortedEncode, sortedEncode / dictionaryPerLine))
        print(String(format: "  the send's way now, sorted fields, into the log buffer:        %7.0f ns/line (%.1f µs)", sortedWhole, sortedWhole / 1000))
        print("  lines written to /dev/null: \(buffered.linesWritten), dropped: \(buffered.linesDropped)")
    }

    /// The handler's encoding before issue 26, kept here as the benchmark's reference.
    static func oldEncoding(label: String, message: String, metadata: Logger.Metadata) -> [UInt8] {
        var merged: Logger.Metadata = [:]
        merged.merge(metadata) { _, new in new }
        var object = JSONObject()
        object["ts"] = .string(RFC3339.format(nanoseconds: UnixTime.nowNanoseconds()))
        object["level"] = .string("info")
        object["logger"] = .string(label)
        object["msg"] = .string(message)
        for key in merged.keys.sorted() where object[key] == nil {
            if case .string(let text) = merged[key]! { object[key] = .string(text) }
        }
        var line = JSONValue.object(object).encoded()
        line.append(UInt8(ascii: "\n"))
        return line
    }
}
