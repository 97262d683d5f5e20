import Foundation
import Glibc
import Logging
import Relay
import RelayBasics
import RelayJSON
import Synchronization
@testable import Telemetry
import Testing
import TestSupport

/// The standard error sink's bounded buffer and drain thread, on a real pipe.
@Suite("log sink: bounded, never blocking")
struct LogSinkTests {
    /// Line `index`, about 200 bytes, its number inside.
    static func line(_ index: Int) -> [UInt8] {
        Array(#"{"msg":"line","n":\#(index),"pad":"\#(String(repeating: "x", count: 180))"}"#.utf8) + [UInt8(ascii: "\n")]
    }

    @Test("a pipe nobody reads: 20,000 lines (4 MB) are taken without blocking, those past the buffer dropped whole and counted; once read, the report of the drops and a closing line whose totals agree with the lines read; no line torn")
    func stalledThenRead() async throws {
        let pipe = Pipe()
        let sink = LogSink(fileDescriptor: pipe.fileHandleForWriting.fileDescriptor, capacity: 64 * 1024)
        // With the old blocking write this loop never ended (the pipe holds 64 KiB).
        let total = 20_000
        for index in 0..<total { sink.write(Self.line(index)) }
        #expect(sink.linesDropped > 0)
        #expect(sink.linesDropped < total)

        // The collector recovers: everything it reads until the closing line.
        let reader = pipe.fileHandleForReading
        let text = Mutex<String>("")
        let done = Atomic<Bool>(false)
        Thread.detachNewThread {
            var bytes: [UInt8] = []
            while case let chunk = reader.availableData, !chunk.isEmpty {
                bytes += chunk
                if String(decoding: bytes.suffix(400), as: UTF8.self).contains(#""msg":"log sink closed""#) { break }
            }
            text.withLock { $0 = String(decoding: bytes, as: UTF8.self) }
            done.store(true, ordering: .sequentiallyConsistent)
        }
        #expect(await Self.offPool { sink.flush(within: 60) } == false, "lines were dropped, so not everything was written")
        #expect(await eventually(60) { done.load(ordering: .sequentiallyConsistent) })

        var numbers: [Int] = []
        var reported = 0
        var closing: JSONValue?
        let lines = text.withLock { $0 }.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.last == "", "the output ends with a whole line")
        for line in lines.dropLast() {
            let json = try #require(try? JSONParser.parse(String(line)), "not torn: \(line.prefix(120))")
            if let number = json["n"]?.integerValue {
                numbers.append(Int(number))
            } else if json["msg"]?.stringValue == "log sink closed" {
                closing = json
            } else {
                #expect(json["level"]?.stringValue == "warning")
                reported += Int(json["dropped"]?.integerValue ?? 0)
            }
        }
        #expect(numbers == numbers.sorted(), "lines keep their order")
        let closingLine = try #require(closing)
        #expect(closingLine["lines_produced"]?.integerValue == Int64(total))
        #expect(closingLine["lines_written"]?.integerValue == Int64(numbers.count))
        #expect(closingLine["lines_dropped"]?.integerValue == Int64(sink.linesDropped))
        #expect(numbers.count + sink.linesDropped == total, "written + dropped = produced")
        #expect(reported == sink.linesDropped, "every drop reported")
        #expect(sink.linesWritten == numbers.count)
    }

    @Test("out of threads (a pids limit), lines wait in the buffer and the start is tried at most every 100 ms; once threads are back a later line starts the drain, and every line is written in order, none dropped")
    func drainStartsOnALaterLine() async throws {
        let pipe = Pipe()
        let threads = RefusingThreadStarter()
        let sink = LogSink(fileDescriptor: pipe.fileHandleForWriting.fileDescriptor, capacity: 256 * 1024, startingThreadsWith: threads.starter)
        // Few enough lines (~200 B each) that all of them and the closing
        // line fit in the pipe (64 KiB), read once the sink is flushed.
        var written = 0
        for _ in 0..<200 {
            sink.write(Self.line(written))
            written += 1
        }
        // Tried at the first line, then once a 100 ms at most: not once a line.
        #expect(threads.refused >= 1)
        #expect(threads.refused < 200, "a start tried for every line")
        #expect(threads.started == 0 && sink.linesWritten == 0 && sink.linesDropped == 0)
        threads.allow()
        // A line after the 100 ms starts the drain.
        #expect(await eventually {
            sink.write(Self.line(written))
            written += 1
            return threads.started == 1
        })
        // A flush that fails leaves the pipe's write end open with no
        // closing line in it: reading then would wait for ever.
        let flushed = await Self.offPool { sink.flush(within: 10) }
        try #require(flushed, "the drain never wrote its lines")
        #expect(sink.linesWritten == written && sink.linesDropped == 0)
        // Everything is in the pipe once the flush has returned true.
        var bytes: [UInt8] = []
        while !String(decoding: bytes.suffix(400), as: UTF8.self).contains(#""msg":"log sink closed""#) {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            bytes += chunk
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let numbers = text.split(separator: "\n").compactMap { line -> Int? in
            guard let object = try? JSONParser.parse(String(line)), object["msg"] == "line" else { return nil }
            return object["n"]?.integerValue.map(Int.init)
        }
        #expect(numbers == Array(0..<written), "every line, in order, the ones that waited for the thread first")
    }

    @Test("out of threads at the close too: the close tries once more, then counts the lines that waited as dropped and says it failed")
    func closeWithoutAThreadCountsTheLines() async throws {
        let pipe = Pipe()
        let threads = RefusingThreadStarter()
        let sink = LogSink(fileDescriptor: pipe.fileHandleForWriting.fileDescriptor, capacity: 256 * 1024, startingThreadsWith: threads.starter)
        for index in 0..<10 { sink.write(Self.line(index)) }
        let refusedBefore = threads.refused
        #expect(await Self.offPool { sink.flush(within: 1) } == false)
        #expect(threads.refused == refusedBefore + 1, "the close did not try again")
        #expect(sink.linesDropped == 10 && sink.linesWritten == 0)
    }

    @Test("a sink that never takes anything is given up on within the close's bound, its lines counted as dropped")
    func deadSinkGivenUp() async throws {
        let pipe = Pipe()
        let sink = LogSink(fileDescriptor: pipe.fileHandleForWriting.fileDescriptor, capacity: 256 * 1024)
        let total = 2_000  // 400 KB: more than the pipe, less than pipe + buffer
        for index in 0..<total { sink.write(Self.line(index)) }
        #expect(await Self.offPool { sink.flush(within: 0.5) } == false)
        // The close returned at its bound; on a loaded machine the drain
        // thread may still be in its last write, which gives up at the same
        // deadline: every line is then counted, written or dropped.
        #expect(await eventually(30) { sink.linesWritten + sink.linesDropped == total }, "written \(sink.linesWritten), dropped \(sink.linesDropped)")
        #expect(sink.linesDropped > 0)
        #expect(sink.linesWritten > 0)
        // What reached the pipe starts with whole lines, in order.
        let held = pipe.fileHandleForReading.availableData
        let lines = String(decoding: held, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count > 1)
        for line in lines.dropLast() { #expect((try? JSONParser.parse(String(line))) != nil) }
    }

    @Test("a log file whose disk fills mid-line: lines are dropped and counted while it is full; once it has room again the cut line is ended and every later line is written whole, after a report of the drops")
    func fullDiskThenRoom() async throws {
        guard let disk = await SmallSpool.mount(megabytes: 1) else {
            Issue.record("a tmpfs cannot be mounted here (not root?): this case needs one")
            return
        }
        do {
            try await Self.fullDiskThenRoom(disk)
        } catch {
            await disk.unmount()
            throw error
        }
        await disk.unmount()
    }

    static func fullDiskThenRoom(_ disk: SmallSpool) async throws {
        let path = disk.path + "/relay.log"
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        // 100 bytes take the file's first page; the filler takes every other
        // page, so the file has 3,996 bytes of room: a write of more stops
        // inside a line (lines are 200 bytes) and the next one fails, ENOSPC.
        let head = Array(#"{"msg":"head","pad":"\#(String(repeating: "h", count: 76))"}"#.utf8) + [UInt8(ascii: "\n")]
        try #require(head.count == 100 && write(fd, head, head.count) == 100)
        try await disk.fill()
        let sink = LogSink(fileDescriptor: fd, capacity: 256 * 1024)
        for index in 0..<50 { sink.write(line(index)) }
        #expect(await eventually(30) { sink.linesWritten + sink.linesDropped == 50 }, "written \(sink.linesWritten), dropped \(sink.linesDropped)")
        // The lines that fit whole in the 3,996 bytes; the next one is cut.
        var room = 4096 - head.count, fitting = 0
        while line(fitting).count <= room {
            room -= line(fitting).count
            fitting += 1
        }
        try #require(room > 0, "the disk fills inside a line")
        #expect(sink.linesWritten == fitting && sink.linesDropped == 50 - fitting)

        // Room again: every line logged from now on reaches the file.
        disk.free()
        for index in 50..<60 { sink.write(line(index)) }
        #expect(await offPool { sink.flush(within: 30) } == false, "lines were dropped, so not everything was written")
        #expect(sink.linesWritten == fitting + 10 && sink.linesDropped == 50 - fitting)

        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.last == "", "the file ends with a whole line")
        var numbers: [Int] = []
        var cut = 0
        var reported = 0
        var closed = false
        for line in lines.dropFirst().dropLast() {
            guard let json = try? JSONParser.parse(String(line)) else {
                cut += 1
                #expect(String(line).hasPrefix(#"{"msg":"line","n":\#(fitting),"#), "only the line the disk cut is not JSON: \(line.prefix(80))")
                continue
            }
            if let number = json["n"]?.integerValue {
                numbers.append(Int(number))
            } else if json["msg"]?.stringValue == "log sink closed" {
                closed = true
                #expect(json["lines_dropped"]?.integerValue == Int64(50 - fitting))
            } else {
                reported += Int(json["dropped"]?.integerValue ?? 0)
            }
        }
        #expect(cut == 1, "the cut line is ended, not glued to the next")
        #expect(numbers == Array(0..<fitting) + Array(50..<60), "the lines before the disk filled and every line after it had room")
        #expect(reported == 50 - fitting, "the drops are reported once the file takes lines again")
        #expect(closed)
    }

    /// Runs a call that waits (a flush) on a thread of its own, not the cooperative pool.
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }

    @Test("the encoder writes the lines the JSONValue encoder wrote: sorted keys, typed numbers and booleans, escapes, the event's metadata over the provider's over the handler's")
    func encoding() throws {
        var line: [UInt8] = []
        LogLineEncoder.encode(
            timestamp: "2026-01-02T03:04:05.000Z", level: .info, label: "l", message: "a \"quoted\"\nline\u{1}",
            handler: ["zeta": "h", "both": "handler", "msg": "ignored"],
            provided: ["trace_id": "t", "both": "provider"],
            event: ["count": .stringConvertible(3), "ratio": .stringConvertible(1.5), "whole": .stringConvertible(2.0),
                    "flag": .stringConvertible(true), "nested": ["b": "2", "a": ["x", "y"]], "both": "event"],
            into: &line)
        #expect(String(decoding: line, as: UTF8.self) == #"{"ts":"2026-01-02T03:04:05.000Z","level":"info","logger":"l","msg":"a \"quoted\"\nline\u0001","both":"event","count":3,"flag":true,"nested":{"a":["x","y"],"b":"2"},"ratio":1.5,"trace_id":"t","whole":2,"zeta":"h"}"# + "\n")
    }

    @Test("keys in UTF-8 byte order however many and whatever their bytes (prefixes, upper case, non-ASCII, long), and the time written as bytes equals the formatted string")
    func keyOrderAndTimestamp() throws {
        let keys = [
            "apns_id", "app", "a", "ab", "aB", "Z", "_x", "z\u{E9}", "ze", "\u{1F600}", "latency_ms", "trace_id", "span_id",
            "token_fingerprint", "a_key_well_past_fifteen_bytes_long", "a_key_well_past_fifteen_bytes", "status", "0", "9a",
        ]
        var metadata: Logger.Metadata = [:]
        for (index, key) in keys.enumerated() { metadata[key] = .string(String(index)) }
        let nanoseconds: UInt64 = 1_764_300_000_123_456_789
        var fromBytes: [UInt8] = []
        LogLineEncoder.encode(
            timestampNanoseconds: nanoseconds, level: .info, label: "l", message: "m", handler: ["h": "1"],
            provided: ["trace_id": "provided", "p": "2"], event: metadata, into: &fromBytes)
        var fromString: [UInt8] = []
        LogLineEncoder.encode(
            timestamp: RFC3339.format(nanoseconds: nanoseconds), level: .info, label: "l", message: "m", handler: ["h": "1"],
            provided: ["trace_id": "provided", "p": "2"], event: metadata, into: &fromString)
        #expect(fromBytes == fromString)
        let text = String(decoding: fromBytes, as: UTF8.self)
        #expect(text.hasPrefix(#"{"ts":"2025-11-28T03:20:00.123Z","level":"info","logger":"l","msg":"m","#))
        let expected = (keys + ["h", "p"]).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        guard case .object(let object) = try JSONParser.parse(String(text.dropLast())) else {
            Issue.record("not an object: \(text)")
            return
        }
        #expect(Array(object.keys.dropFirst(4)) == expected)
        #expect(object["trace_id"]?.stringValue == String(keys.firstIndex(of: "trace_id")!), "the event's value wins")
    }

    @Test("sorted fields give the bytes their metadata dictionary gives, merged with the provider's and the handler's keys before, between and after them, overridden or not, reserved ones dropped, values and labels escaped, with and without keys to merge")
    func sortedFieldsSameAsMetadata() throws {
        let all: [LogField] = [
            LogField("apns_id", "9f1c"), LogField("app", "a \"quoted\"\napp"), LogField("attempts", "2"),
            LogField("channel_id", "c\u{1}"), LogField("latency_ms", "1.25"), LogField("operation", "alert"),
            LogField("outcome", "rejected"), LogField("reason", "Unregistered"), LogField("span_id", "s"),
            LogField("status", "410"), LogField("token_fingerprint", "\u{E9}f"), LogField("trace_id", "t"),
        ]
        let handlers: [Logger.Metadata] = [
            [:], ["relay_instance": "r1"], ["outcome": "handler", "msg": "ignored", "aaa": "first", "zzz": ["n": .stringConvertible(1)]],
            ["both": "handler", "b": .stringConvertible(3)],
        ]
        let provided: [Logger.Metadata?] = [
            nil, [:], ["trace_id": "provider", "span_id": "provider"], ["both": "provider", "app_x": "p", "level": "ignored"],
        ]
        // Every subset of the fields in a few shapes: all, none, each alone, and every other one.
        var subsets: [[LogField]] = [all, []] + all.map { [$0] }
        subsets.append(all.enumerated().filter { $0.offset % 2 == 0 }.map(\.element))
        subsets.append(all.enumerated().filter { $0.offset % 2 == 1 }.map(\.element))
        var compared = 0
        for fields in subsets {
            for handler in handlers {
                for provided in provided {
                    for label in ["relay", "a \"label\"\twith escapes"] {
                        let fromFields = fields.withUnsafeBufferPointer { fields in
                            LogLineEncoder.line(
                                timestampNanoseconds: 1_764_300_000_123_456_789, level: .info, label: label, message: "send finished",
                                handler: handler, provided: provided, sortedFields: fields)
                        }
                        var fromMetadata: [UInt8] = []
                        let metadata = fields.withUnsafeBufferPointer { Logger.Metadata($0) }
                        LogLineEncoder.encode(
                            timestampNanoseconds: 1_764_300_000_123_456_789, level: .info, label: label, message: "send finished",
                            handler: handler, provided: provided, event: metadata, into: &fromMetadata)
                        #expect(String(decoding: fromFields, as: UTF8.self) == String(decoding: fromMetadata, as: UTF8.self))
                        compared += 1
                    }
                }
            }
        }
        #expect(compared == (all.count + 4) * 16 * 2)
    }
}
