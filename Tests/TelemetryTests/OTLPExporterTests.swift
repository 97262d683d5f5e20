import Foundation
import Instrumentation
import Logging
import Relay
import RelayBasics
import RelayJSON
import Synchronization
import Telemetry
import Testing
import TestSupport
import Tracing

/// The OTLP exporter against peers it did not write: OpenTelemetry's own
/// protobuf classes (PyPI opentelemetry-proto) decode what it encodes, and
/// scripts/lib/otlp_receiver.py (those classes behind Python's HTTP server)
/// is the collector, live, stopped, or replaced by a listener that never reads.
@Suite("OTLP exporter: encoding, export and drop accounting")
struct OTLPExporterTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    struct PeerError: Error, CustomStringConvertible { let description: String }

    /// A Python child that prints `PREFIX PORT` once listening.
    static func python(_ arguments: [String], portAfter prefix: String) async throws -> (child: ChildProcess, port: UInt16) {
        let child = try ChildProcess(["python3"] + arguments, standardOutput: .pipe, standardError: .inherit)
        let lines = Mutex<[String]>([])
        ChildProcess.collectLines(of: child.standardOutput!) { line in lines.withLock { $0.append(line) } }
        var found: UInt16?
        _ = await eventually(30) {
            found = lines.withLock { $0 }.first { $0.hasPrefix(prefix) }.flatMap { UInt16($0.dropFirst(prefix.count)) }
            return found != nil || child.exitStatus != nil
        }
        guard let found else { throw PeerError(description: "\(arguments.first ?? "python") did not start; is opentelemetry-proto installed?") }
        return (child, found)
    }

    /// otlp_receiver.py writing one JSON line per span to `file`, on `port`
    /// (0: any); with `keepAlive`, in HTTP/1.1 keeping each connection for the
    /// next request (as OpenTelemetry's Collector does), else in HTTP/1.0.
    static func receiver(_ file: String, port: UInt16 = 0, keepAlive: Bool = false) async throws -> (child: ChildProcess, port: UInt16) {
        try await python(
            [root.appendingPathComponent("scripts/lib/otlp_receiver.py").path, file, "--port", String(port)] + (keepAlive ? ["--keep-alive"] : []),
            portAfter: "otlp-receiver on ")
    }

    /// A collector that accepts connections (the kernel does, from the backlog) and never reads a byte.
    static func stalledListener() async throws -> (child: ChildProcess, port: UInt16) {
        let code = """
            import socket, sys, time
            s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
            print("stalled on", s.getsockname()[1], flush=True)
            time.sleep(3600)
            """
        return try await python(["-c", code], portAfter: "stalled on ")
    }

    /// A collector that reads each request's head and body, answers 200 with
    /// a chunked body that never ends (64 KiB chunks), and writes to `file`
    /// how many body bytes it sent before the client closed the connection.
    static func endlessAnswerCollector(_ file: String) async throws -> (child: ChildProcess, port: UInt16) {
        let code = """
            import socket, sys
            s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
            print("endless on", s.getsockname()[1], flush=True)
            while True:
                c, _ = s.accept()
                head = b""
                while b"\\r\\n\\r\\n" not in head:
                    head += c.recv(65536)
                length = int([l.split(b":")[1] for l in head.split(b"\\r\\n") if l.lower().startswith(b"content-length:")][0])
                body = head.split(b"\\r\\n\\r\\n", 1)[1]
                while len(body) < length:
                    body += c.recv(65536)
                c.sendall(b"HTTP/1.1 200 OK\\r\\ncontent-type: application/x-protobuf\\r\\ntransfer-encoding: chunked\\r\\n\\r\\n")
                chunk = b"10000\\r\\n" + b"x" * 65536 + b"\\r\\n"
                sent = 0
                try:
                    while True:
                        c.sendall(chunk)
                        sent += 65536
                except OSError:
                    pass
                open(sys.argv[1], "w").write(str(sent))
                c.close()
            """
        return try await python(["-c", code, file], portAfter: "endless on ")
    }

    /// A port nothing listens on: bound by a child that exits at once.
    static func closedPort() async throws -> UInt16 {
        let result = try await ProcessRunner.runOffPool([
            "python3", "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])",
        ])
        return try #require(UInt16(result.output.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    static func lines(_ file: String) -> [JSONValue] {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
    }

    /// Drops as the callback saw them, when it saw them.
    final class DropCounter: Sendable {
        let counts = Mutex<[OTLPExporter.Drop: Int]>([:])
        var callback: @Sendable (OTLPExporter.Drop, Int) -> Void {
            { reason, count in self.counts.withLock { $0[reason, default: 0] += count } }
        }
        subscript(_ reason: OTLPExporter.Drop) -> Int { counts.withLock { $0[reason] ?? 0 } }
        var total: Int { counts.withLock { $0.values.reduce(0, +) } }
    }

    static func exporter(
        port: UInt16, queue: Int = 2048, batch: Int = 512, delay: Int = 20, timeout: Int = 2000, drops: DropCounter,
        started: Bool = true
    ) -> OTLPExporter {
        let configuration = OTLPExporter.Configuration(
            endpoint: OTLPEndpoint(url: "http://127.0.0.1:\(port)/v1/traces")!, headers: [("x-test", "1")],
            resource: [("service.name", "exporter-test"), ("service.instance.id", "t-1")], maximumQueueSize: queue,
            maximumExportBatchSize: batch, scheduleDelayMilliseconds: delay, exportTimeoutMilliseconds: timeout)
        let exporter = OTLPExporter(
            configuration: configuration, opener: OTLPPlainOpener(), scopeVersion: "test",
            logger: Logger(label: "otlp-test") { _ in SwiftLogNoOpLogHandler() }, dropped: drops.callback)
        if started { try? exporter.start() }
        return exporter
    }

    @Test("an exporter never started (a relay whose start failed) exports nothing; its shutdown drops what was recorded, counted, and a start after it starts nothing")
    func neverStarted() async throws {
        let drops = DropCounter()
        let exporter = Self.exporter(port: 1, drops: drops, started: false)
        for index in 0..<3 { exporter.record(Self.record(index)) }
        #expect(exporter.shutdown(within: 1) == false)
        try exporter.start()
        exporter.record(Self.record(3))
        let counts = exporter.counts
        #expect(counts.recorded == 4 && counts.exported == 0 && counts.droppedQueueFull == 0 && counts.droppedExportFailed == 4, "\(counts)")
        #expect(drops[.exportFailed] == 4 && drops.total == 4)
    }

    static func record(_ index: Int, padding: Int = 0) -> OTLPSpanRecord {
        var attributes = SpanAttributes()
        attributes["apns.attempt"] = index
        if padding > 0 { attributes["padding"] = String(repeating: "x", count: padding) }
        return OTLPSpanRecord(
            traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: String(format: "%016x", index + 1), parentSpanID: nil,
            name: "apns.attempt", kind: .client, startNanoseconds: 1, endNanoseconds: 2, attributes: attributes)
    }

    @Test("the encoded ExportTraceServiceRequest decodes with opentelemetry-proto, every field as recorded")
    func decodesWithOpenTelemetryProto() async throws {
        var attributes = SpanAttributes()
        attributes["s"] = "ünïcode ✓"
        attributes["i"] = 503
        attributes["n"] = -7
        attributes["big"] = Int64.max
        attributes["d"] = 0.25
        attributes["b"] = true
        attributes["strings"] = ["a", "b"]
        attributes["ints"] = [Int64(1), -2]
        attributes["long"] = String(repeating: "y", count: 300)
        let records = [
            OTLPSpanRecord(
                traceID: "4bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7", parentSpanID: "1111111111111111",
                name: "apns.send", kind: .client, startNanoseconds: 1_700_000_000_123_456_789, endNanoseconds: 1_700_000_000_223_456_789,
                attributes: attributes, status: .error, statusMessage: "BadDeviceToken"),
            OTLPSpanRecord(
                traceID: "0af7651916cd43dd8448eb211c80319c", spanID: "b7ad6b7169203331", parentSpanID: nil, name: "ingress.request",
                kind: .server, startNanoseconds: 5, endNanoseconds: 6, status: .ok),
            OTLPSpanRecord(
                traceID: "0af7651916cd43dd8448eb211c80319c", spanID: "b7ad6b7169203332", parentSpanID: nil, name: "internal",
                kind: .internal, startNanoseconds: 7, endNanoseconds: 8),
            // Ids the relay never makes (not hex; an odd count of digits) are
            // written as their UTF-8 bytes; a name past 127 bytes takes a
            // two-byte length.
            OTLPSpanRecord(
                traceID: "not-hex!", spanID: "abc", parentSpanID: "0g", name: String(repeating: "n", count: 200),
                kind: .producer, startNanoseconds: 9, endNanoseconds: 10),
        ]
        var encoder = OTLPRequestEncoder(
            resource: [("service.name", "apns-relay"), ("service.instance.id", "relay-1")], scopeName: "apns-relay", scopeVersion: "1.2.3")
        var body: [UInt8] = []
        encoder.encode(records, into: &body)
        let path = NSTemporaryDirectory() + "otlp-request-\(UUID().uuidString).bin"
        try Data(body).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let decoder = """
            import sys, json
            from google.protobuf.json_format import MessageToDict
            from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(open(sys.argv[1], "rb").read())
            print(json.dumps(MessageToDict(request, preserving_proto_field_name=True)))
            """
        let result = try await ProcessRunner.runOffPool(["python3", "-c", decoder, path])
        #expect(result.status == 0, "\(result.output)")
        let decoded = try JSONParser.parse(result.output)
        let resourceSpans = try #require(decoded["resource_spans"]?.arrayValue)
        #expect(resourceSpans.count == 1)
        let resource = resourceSpans[0]["resource"]?["attributes"]?.arrayValue ?? []
        #expect(resource.map { $0["key"]?.stringValue ?? "" } == ["service.name", "service.instance.id"])
        #expect(resource.first?["value"]?["string_value"] == "apns-relay")
        let scope = try #require(resourceSpans[0]["scope_spans"]?.arrayValue?.first)
        #expect(scope["scope"]?["name"] == "apns-relay")
        #expect(scope["scope"]?["version"] == "1.2.3")
        let spans = try #require(scope["spans"]?.arrayValue)
        #expect(spans.count == 4)
        // MessageToDict writes bytes as base64 and 64-bit integers as strings.
        func base64(_ hex: String) -> String { Data(Hex.decode(hex)!).base64EncodedString() }
        let send = spans[0]
        #expect(send["trace_id"]?.stringValue == base64("4bf92f3577b34da6a3ce929d0e0e4736"))
        #expect(send["span_id"]?.stringValue == base64("00f067aa0ba902b7"))
        #expect(send["parent_span_id"]?.stringValue == base64("1111111111111111"))
        #expect(send["name"] == "apns.send")
        #expect(send["kind"] == "SPAN_KIND_CLIENT")
        #expect(send["start_time_unix_nano"] == "1700000000123456789")
        #expect(send["end_time_unix_nano"] == "1700000000223456789")
        #expect(send["status"]?["code"] == "STATUS_CODE_ERROR")
        #expect(send["status"]?["message"] == "BadDeviceToken")
        var values: [String: JSONValue] = [:]
        for pair in send["attributes"]?.arrayValue ?? [] { values[pair["key"]?.stringValue ?? ""] = pair["value"] }
        #expect(values.count == 9)
        #expect(values["s"]?["string_value"] == "ünïcode ✓")
        #expect(values["i"]?["int_value"] == "503")
        #expect(values["n"]?["int_value"] == "-7")
        #expect(values["big"]?["int_value"]?.stringValue == String(Int64.max))
        #expect(values["d"]?["double_value"] == 0.25)
        #expect(values["b"]?["bool_value"] == true)
        #expect(values["strings"]?["array_value"]?["values"]?.arrayValue?.map { $0["string_value"]?.stringValue ?? "" } == ["a", "b"])
        #expect(values["ints"]?["array_value"]?["values"]?.arrayValue?.map { $0["int_value"]?.stringValue ?? "" } == ["1", "-2"])
        #expect(values["long"]?["string_value"]?.stringValue?.count == 300)
        #expect(spans[1]["kind"] == "SPAN_KIND_SERVER")
        #expect(spans[1]["parent_span_id"] == nil)
        #expect(spans[1]["status"]?["code"] == "STATUS_CODE_OK")
        #expect(spans[2]["kind"] == "SPAN_KIND_INTERNAL")
        #expect(spans[2]["status"] == nil)
        func base64UTF8(_ text: String) -> String { Data(text.utf8).base64EncodedString() }
        #expect(spans[3]["trace_id"]?.stringValue == base64UTF8("not-hex!"))
        #expect(spans[3]["span_id"]?.stringValue == base64UTF8("abc"))
        #expect(spans[3]["parent_span_id"]?.stringValue == base64UTF8("0g"))
        #expect(spans[3]["name"]?.stringValue == String(repeating: "n", count: 200))
        #expect(spans[3]["kind"] == "SPAN_KIND_PRODUCER")
        #expect(spans[3]["end_time_unix_nano"] == "10")
    }

    @Test("a tracer's spans reach a live receiver with their parents, and the exporter accounts for each: exported == recorded")
    func liveReceiver() async throws {
        let file = NSTemporaryDirectory() + "otlp-live-\(UUID().uuidString).jsonl"
        let receiver = try await Self.receiver(file)
        defer { receiver.child.terminate() }
        let drops = DropCounter()
        let exporter = Self.exporter(port: receiver.port, batch: 100, drops: drops)
        let tracer = OTLPTracer(exporter: exporter, sampler: OTLPSampler(root: .alwaysOn, parentBased: true))
        var context = InstrumentationContext.topLevel
        tracer.extract(
            [HTTPHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")], into: &context, using: HTTPHeaderPropagation())
        for index in 0..<300 {
            let send = tracer.startSpan("apns.send", context: context, ofKind: .client)
            send.attributes["apns.attempts"] = index
            let attempt = tracer.startSpan("apns.attempt", context: send.context, ofKind: .client)
            attempt.setStatus(SpanStatus(code: .error, message: "ServiceUnavailable"))
            attempt.end()
            send.end()
        }
        // A caller that does not sample: its spans keep their ids but nothing is recorded.
        var unsampled = InstrumentationContext.topLevel
        tracer.extract(
            [HTTPHeader("traceparent", "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")], into: &unsampled, using: HTTPHeaderPropagation())
        let quiet = tracer.startSpan("apns.send", context: unsampled, ofKind: .client)
        #expect(!quiet.isRecording)
        #expect(quiet.traceParent.traceID == "5bf92f3577b34da6a3ce929d0e0e4736" && !quiet.traceParent.isSampled)
        quiet.end()

        #expect(await Self.finishes { exporter.shutdown(within: 20) })
        let counts = exporter.counts
        #expect(counts.recorded == 600 && counts.exported == 600 && counts.dropped == 0 && drops.total == 0, "\(counts)")
        let spans = Self.lines(file)
        #expect(spans.count == 600)
        let sends = spans.filter { $0["name"] == "apns.send" }
        let attempts = spans.filter { $0["name"] == "apns.attempt" }
        #expect(sends.count == 300 && attempts.count == 300)
        #expect(sends.allSatisfy { $0["parent_span_id"] == "00f067aa0ba902b7" && $0["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736" })
        let sendIDs = Set(sends.compactMap { $0["span_id"]?.stringValue })
        #expect(attempts.allSatisfy { attempt in
            sendIDs.contains(attempt["parent_span_id"]?.stringValue ?? "") && attempt["status"] == 2 && attempt["kind"] == 3
        })
        #expect(sends.first?["resource"]?["service.name"] == "exporter-test")
        #expect(sends.first?["scope"] == "apns-relay")
    }

    @Test("attributes set one at a time (SpanAttributeWriter) or through the tracing API reach the receiver as last set, each key once, and read back the same")
    func attributesEncodedAsSet() async throws {
        let file = NSTemporaryDirectory() + "otlp-attributes-\(UUID().uuidString).jsonl"
        let receiver = try await Self.receiver(file)
        defer { receiver.child.terminate() }
        let drops = DropCounter()
        let exporter = Self.exporter(port: receiver.port, batch: 100, drops: drops)
        let tracer = OTLPTracer(exporter: exporter, sampler: OTLPSampler(root: .alwaysOn, parentBased: true))
        let span = tracer.startSpan("apns.send", context: InstrumentationContext.topLevel, ofKind: .client)
        let writer = SpanAttributeWriter(span)
        writer.set("apns.id", "first")
        writer.set("apns.status", 200)
        writer.set("apns.trap_ids", ["MS001", "MS004"])
        writer.set("apns.id", "second")  // replaces the first: OTLP keys are unique
        span.attributes["via.api"] = true
        span.attributes["apns.status"] = 410  // the tracing API's way replaces too
        writer.set("apns.ratio", 0.5)
        #expect(span.attributes["apns.id"]?.toSpanAttribute() == .string("second"))
        #expect(span.attributes["apns.status"]?.toSpanAttribute() == .int64(410))
        var count = 0
        span.attributes.forEach { _, _ in count += 1 }
        #expect(count == 5)
        span.end()
        writer.set("after.end", 1)  // recorded nowhere: the span has ended
        #expect(await Self.finishes { exporter.shutdown(within: 20) })
        #expect(exporter.counts.exported == 1, "\(exporter.counts)")
        let exported = try #require(Self.lines(file).first)
        let keys = exported["attribute_keys"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(keys.sorted() == ["apns.id", "apns.ratio", "apns.status", "apns.trap_ids", "via.api"])
        let attributes = try #require(exported["attributes"])
        #expect(attributes["apns.id"] == "second")
        #expect(attributes["apns.status"] == 410)
        #expect(attributes["apns.trap_ids"]?.arrayValue?.compactMap(\.stringValue) == ["MS001", "MS004"])
        #expect(attributes["via.api"] == true)
        #expect(attributes["apns.ratio"] == 0.5)
    }

    @Test("a child started from its span (ChildSpanStarting) is the span startSpan(context: span.context) gives, for every sampler and parent, and reaches the receiver under its parent")
    func childStartedFromItsSpan() async throws {
        let file = NSTemporaryDirectory() + "otlp-child-\(UUID().uuidString).jsonl"
        let receiver = try await Self.receiver(file)
        defer { receiver.child.terminate() }
        let exporter = Self.exporter(port: receiver.port, batch: 100, drops: DropCounter())
        var sampledCaller = InstrumentationContext.topLevel
        OTLPTracer(exporter: exporter, sampler: OTLPSampler(root: .alwaysOn, parentBased: true)).extract(
            [HTTPHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")], into: &sampledCaller,
            using: HTTPHeaderPropagation())
        var unsampledCaller = InstrumentationContext.topLevel
        unsampledCaller.remoteParent = TraceParent(traceID: "5bf92f3577b34da6a3ce929d0e0e4736", spanID: "00f067aa0ba902b7", flags: 0)
        let samplers = [
            OTLPSampler(root: .alwaysOn, parentBased: true), OTLPSampler(root: .alwaysOff, parentBased: true),
            OTLPSampler(root: .alwaysOn, parentBased: false), OTLPSampler(root: .traceIDRatio(0.5), parentBased: false),
        ]
        var exportedPairs: [(parent: String, child: String)] = []
        for sampler in samplers {
            let tracer = OTLPTracer(exporter: exporter, sampler: sampler)
            for caller in [sampledCaller, unsampledCaller, InstrumentationContext.topLevel] {
                let parent = tracer.startSpan("apns.send", context: caller, ofKind: .client)
                let viaTracer = tracer.startSpan("apns.attempt", context: parent.context, ofKind: .client)
                let child = try #require(parent.startChild("apns.attempt", ofKind: .client) as? OTLPSpan)
                #expect(child.identity.traceID == parent.identity.traceID)
                #expect(child.identity.parentSpanID == parent.identity.spanID)
                #expect(child.identity.traceID == viaTracer.identity.traceID)
                #expect(child.identity.parentSpanID == viaTracer.identity.parentSpanID)
                #expect(child.identity.sampled == viaTracer.identity.sampled, "\(sampler)")
                #expect(child.isRecording == viaTracer.isRecording)
                #expect(child.identity.spanID != parent.identity.spanID && child.identity.spanID.utf8.count == 16)
                #expect(child.kind == .client && child.operationName == "apns.attempt")
                #expect(child.context.spanIdentity == child.identity)
                #expect(child.context.remoteParent == viaTracer.context.remoteParent)
                #expect(child.traceParent == child.identity.traceParent)
                if child.isRecording { exportedPairs.append((parent.identity.spanID, child.identity.spanID)) }
                child.end()
            }
        }
        #expect(await Self.finishes { exporter.shutdown(within: 20) })
        #expect(exporter.counts.exported == exportedPairs.count, "\(exporter.counts)")
        let spans = Self.lines(file)
        for pair in exportedPairs {
            let exported = spans.first { $0["span_id"]?.stringValue == pair.child }
            #expect(exported?["parent_span_id"]?.stringValue == pair.parent)
            #expect(exported?["name"] == "apns.attempt" && exported?["kind"] == 3)
        }
        #expect(!exportedPairs.isEmpty)
    }

    @Test("the send span's starting attributes set at once (SendSpanAttributes) are the bytes and the order of setting them one at a time, replace an earlier value, and are replaced by a later one")
    func sendSpanAttributesAtOnce() async throws {
        let file = NSTemporaryDirectory() + "otlp-send-attributes-\(UUID().uuidString).jsonl"
        let receiver = try await Self.receiver(file)
        defer { receiver.child.terminate() }
        let exporter = Self.exporter(port: receiver.port, batch: 100, drops: DropCounter())
        let tracer = OTLPTracer(exporter: exporter, sampler: OTLPSampler(root: .alwaysOn, parentBased: true))
        let full = SendSpanAttributes(
            operation: "device", app: "com.example.app", environment: "production",
            apnsID: "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", payloadBytes: 1234, pushType: "alert", priority: 10,
            tokenFingerprint: "fp-9a8b7c", channelID: "channel-é", snapshotID: "snapshot-1")
        let sparse = SendSpanAttributes(
            operation: "broadcast", app: "a", environment: "development", apnsID: "x", payloadBytes: 0)
        // Past the one buffer's 1 KiB: written one by one, the same bytes.
        let long = SendSpanAttributes(
            operation: "long", app: "a", environment: "production", apnsID: "y", payloadBytes: -1,
            snapshotID: String(repeating: "é", count: 700))
        var spans: [OTLPSpan] = []
        for attributes in [full, sparse, long] {
            let atOnce = tracer.startSpan("at.once", context: InstrumentationContext.topLevel, ofKind: .client)
            SpanAttributeWriter(atOnce).set(attributes)
            let oneByOne = tracer.startSpan("one.by.one", context: InstrumentationContext.topLevel, ofKind: .client)
            let writer = SpanAttributeWriter(oneByOne)
            attributes.forEach { key, value in writer.set(key, value) }
            spans += [atOnce, oneByOne]
        }
        // Set before and after: the struct's value replaces the earlier one, a later set replaces the struct's.
        let mixed = tracer.startSpan("mixed", context: InstrumentationContext.topLevel, ofKind: .client)
        let writer = SpanAttributeWriter(mixed)
        writer.set("apns.id", "earlier")
        writer.set("other", 1)
        writer.set(full)
        writer.set("apns.payload_bytes", 99)
        #expect(mixed.attributes["apns.id"]?.toSpanAttribute() == .string(full.apnsID))
        spans.append(mixed)
        // Set first (the one-buffer path) and then again: the later value replaces it.
        let later = tracer.startSpan("later", context: InstrumentationContext.topLevel, ofKind: .client)
        let laterWriter = SpanAttributeWriter(later)
        laterWriter.set(full)
        laterWriter.set("apns.payload_bytes", 7)
        laterWriter.set("apns.id", "replaced")
        spans.append(later)
        for span in spans { span.end() }
        #expect(await Self.finishes { exporter.shutdown(within: 20) })
        #expect(exporter.counts.exported == 8, "\(exporter.counts)")
        let exported = Self.lines(file)
        func span(_ name: String, _ operation: String) throws -> JSONValue {
            try #require(exported.first { $0["name"]?.stringValue == name && $0["attributes"]?["apns.operation"]?.stringValue == operation })
        }
        for operation in ["device", "broadcast", "long"] {
            let atOnce = try span("at.once", operation), oneByOne = try span("one.by.one", operation)
            #expect(atOnce["attributes"] == oneByOne["attributes"])
            #expect(atOnce["attribute_keys"] == oneByOne["attribute_keys"])
        }
        let device = try span("at.once", "device")
        #expect(device["attribute_keys"]?.arrayValue?.compactMap(\.stringValue) == [
            "apns.operation", "apns.app", "apns.environment", "apns.id", "apns.payload_bytes", "apns.push_type",
            "apns.priority", "apns.token_fingerprint", "apns.channel_id", "surface.snapshot_id",
        ])
        #expect(device["attributes"]?["apns.payload_bytes"] == 1234)
        #expect(device["attributes"]?["apns.priority"] == 10)
        #expect(device["attributes"]?["apns.channel_id"] == "channel-é")
        #expect(try span("at.once", "broadcast")["attribute_keys"]?.arrayValue?.count == 5)
        #expect(try span("at.once", "long")["attributes"]?["surface.snapshot_id"]?.stringValue?.count == 700)
        #expect(try span("at.once", "long")["attributes"]?["apns.payload_bytes"] == -1)
        let mixedExported = try span("mixed", "device")
        #expect(mixedExported["attributes"]?["apns.id"] == .string(full.apnsID))
        #expect(mixedExported["attributes"]?["apns.payload_bytes"] == 99)
        #expect(mixedExported["attributes"]?["other"] == 1)
        #expect(mixedExported["attribute_keys"]?.arrayValue?.count == 11)
        let laterExported = try span("later", "device")
        #expect(laterExported["attributes"]?["apns.payload_bytes"] == 7)
        #expect(laterExported["attributes"]?["apns.id"] == "replaced")
        #expect(laterExported["attribute_keys"]?.arrayValue?.count == 10)
    }

    @Test("many keys (more than the span's 64 key bits), repeats among them, a value past the one-copy bound and every value kind reach the receiver as last set and read back from the span's bytes")
    func attributesManyKeysLongValuesEveryKind() async throws {
        let file = NSTemporaryDirectory() + "otlp-attributes-many-\(UUID().uuidString).jsonl"
        let receiver = try await Self.receiver(file)
        defer { receiver.child.terminate() }
        let exporter = Self.exporter(port: receiver.port, batch: 100, drops: DropCounter())
        let tracer = OTLPTracer(exporter: exporter, sampler: OTLPSampler(root: .alwaysOn, parentBased: true))
        let span = tracer.startSpan("apns.send", context: InstrumentationContext.topLevel, ofKind: .client)
        let writer = SpanAttributeWriter(span)
        // 100 keys, then each even one again: with 64 key bits, many a first
        // set shares a bit with an earlier key (a search that finds nothing).
        for index in 0..<100 { writer.set("key.\(index)", index) }
        for index in stride(from: 0, to: 100, by: 2) { writer.set("key.\(index)", "again \(index)") }
        let long = String(repeating: "é", count: 300)  // 600 bytes: written by pieces
        writer.set("long.value", long)
        writer.set(String(repeating: "k", count: 200), -7)  // a key past the bound, a negative integer
        span.attributes["small"] = SpanAttribute.int32(-3)
        writer.set("flag", false)
        writer.set("ratio", -2.25)
        writer.set("names", ["a", "", "ü"])
        writer.set("numbers", SpanAttribute.int64Array([1, -1, .max]))
        writer.set("described", SpanAttribute.stringConvertible(URL(fileURLWithPath: "/x")))

        let read = span.attributes
        var count = 0
        read.forEach { _, _ in count += 1 }
        #expect(count == 108)
        #expect(read["key.3"]?.toSpanAttribute() == .int64(3))
        #expect(read["key.4"]?.toSpanAttribute() == .string("again 4"))
        #expect(read["long.value"]?.toSpanAttribute() == .string(long))
        #expect(read[String(repeating: "k", count: 200)]?.toSpanAttribute() == .int64(-7))
        #expect(read["small"]?.toSpanAttribute() == .int64(-3))  // as the receiver reads it
        #expect(read["flag"]?.toSpanAttribute() == .bool(false))
        #expect(read["ratio"]?.toSpanAttribute() == .double(-2.25))
        #expect(read["names"]?.toSpanAttribute() == .stringArray(["a", "", "ü"]))
        #expect(read["numbers"]?.toSpanAttribute() == .int64Array([1, -1, Int64.max]))
        #expect(read["described"]?.toSpanAttribute() == .string("file:///x"))
        span.end()
        #expect(await Self.finishes { exporter.shutdown(within: 20) })
        #expect(exporter.counts.exported == 1, "\(exporter.counts)")
        let exported = try #require(Self.lines(file).first)
        let keys = exported["attribute_keys"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(keys.count == 108 && Set(keys).count == 108, "each key once: \(keys.count)")
        let attributes = try #require(exported["attributes"])
        #expect(attributes["key.3"] == 3)
        #expect(attributes["key.4"] == "again 4")
        #expect(attributes["key.99"] == 99)
        #expect(attributes["long.value"]?.stringValue == long)
        #expect(attributes[String(repeating: "k", count: 200)] == -7)
        #expect(attributes["small"] == -3)
        #expect(attributes["flag"] == false)
        #expect(attributes["ratio"] == -2.25)
        #expect(attributes["names"]?.arrayValue?.compactMap(\.stringValue) == ["a", "", "ü"])
        #expect(attributes["described"] == "file:///x")
    }

    /// An exporter (a 500-span buffer, batches of 100) whose first `count`
    /// spans reached a receiver writing to `file`, which is then stopped.
    static func exportedThenStopped(
        _ count: Int, file: String
    ) async throws -> (exporter: OTLPExporter, drops: DropCounter, port: UInt16) {
        let receiver = try await Self.receiver(file)
        let drops = DropCounter()
        let exporter = Self.exporter(port: receiver.port, queue: 500, batch: 100, timeout: 500, drops: drops)
        for index in 0..<count { exporter.record(Self.record(index)) }
        #expect(await eventually(30) { exporter.counts.exported == count }, "\(exporter.counts)")
        receiver.child.terminate()
        #expect(await receiver.child.exited() == 0)
        return (exporter, drops, receiver.port)
    }

    @Test("receiver stopped mid-run: each span is exported or counted dropped when it is dropped; received == exported, exported + dropped == recorded")
    func receiverStopped() async throws {
        let file = NSTemporaryDirectory() + "otlp-stopped-\(UUID().uuidString).jsonl"
        let (exporter, drops, _) = try await Self.exportedThenStopped(400, file: file)
        // Past the buffer's 500 the rest is refused (each batch now takes its
        // retries' back-off): counted by the time record() returns.
        for index in 400..<2400 { exporter.record(Self.record(index)) }
        let queueFull = drops[.queueFull]
        #expect(queueFull > 0)
        #expect(queueFull == exporter.counts.droppedQueueFull)
        // The buffered ones fail against the refused connection and are counted as each batch fails.
        #expect(await eventually(30) { drops[.exportFailed] > 0 })
        #expect(await Self.finishes { exporter.shutdown(within: 5) } == false)
        let counts = exporter.counts
        #expect(counts.recorded == 2400)
        #expect(counts.exported == 400)
        #expect(counts.exported + counts.dropped == counts.recorded, "\(counts)")
        #expect(drops[.queueFull] == counts.droppedQueueFull && drops[.exportFailed] == counts.droppedExportFailed)
        #expect(Self.lines(file).count == counts.exported)
    }

    @Test("a collector down for a while and started again where it was: the spans of the outage are counted dropped, and export resumes on its own with the next batch")
    func receiverBack() async throws {
        let before = NSTemporaryDirectory() + "otlp-back-before-\(UUID().uuidString).jsonl"
        let after = NSTemporaryDirectory() + "otlp-back-after-\(UUID().uuidString).jsonl"
        let (exporter, drops, port) = try await Self.exportedThenStopped(200, file: before)
        // The outage: a batch fails against the refused connection, every try of it.
        for index in 200..<300 { exporter.record(Self.record(index)) }
        #expect(await eventually(30) { drops[.exportFailed] == 100 }, "\(exporter.counts)")

        let second = try await Self.receiver(after, port: port)
        for index in 300..<500 { exporter.record(Self.record(index)) }
        #expect(await eventually(30) { exporter.counts.exported == 400 }, "export resumed: \(exporter.counts)")
        #expect(await Self.finishes { exporter.shutdown(within: 5) } == false, "not everything was exported: the outage's batch was dropped")
        second.child.terminate()
        #expect(await second.child.exited() == 0)
        let counts = exporter.counts
        #expect(counts.recorded == 500 && counts.dropped == 100 && counts.exported + counts.dropped == counts.recorded, "\(counts)")
        #expect(Self.lines(before).count == 200)
        let received = Self.lines(after).compactMap { $0["attributes"]?["apns.attempt"]?.integerValue }.sorted()
        #expect(received == (300..<500).map(Int64.init), "every span recorded after the collector came back reached it, once")
    }

    @Test("a collector whose answer is a chunked body without end: the export counts as done, the client stops reading past its bound and closes the connection, holding none of it")
    func endlessAnswer() async throws {
        let sentFile = NSTemporaryDirectory() + "otlp-endless-\(UUID().uuidString)"
        let collector = try await Self.endlessAnswerCollector(sentFile)
        defer { collector.child.terminate() }
        let drops = DropCounter()
        // A long export timeout: the old reader held the body until it passed.
        let exporter = Self.exporter(port: collector.port, queue: 100, batch: 10, timeout: 60_000, drops: drops)
        for index in 0..<10 { exporter.record(Self.record(index)) }
        #expect(await eventually(30) { exporter.counts.exported == 10 }, "the collector's 200 counts: \(exporter.counts)")
        #expect(await eventually(30) { FileManager.default.fileExists(atPath: sentFile) }, "the client closed the connection")
        let sent = Int((try? String(contentsOfFile: sentFile, encoding: .utf8)) ?? "") ?? -1
        // The bound (64 KiB) and what the two sockets' buffers take before the close: a few MiB at most.
        #expect(sent >= 0 && sent < 32 << 20, "the collector sent \(sent) bytes before the client closed")
        #expect(await Self.finishes { exporter.shutdown(within: 5) })
    }

    @Test("a collector that accepts and never reads: recording never waits on it, each stuck batch fails at the export timeout and is counted, the close keeps its bound")
    func collectorNeverReads() async throws {
        let stalled = try await Self.stalledListener()
        defer { stalled.child.terminate() }
        let drops = DropCounter()
        // 2 KiB a span, 200 a batch: a request far larger than the socket buffers take.
        let exporter = Self.exporter(port: stalled.port, queue: 1000, batch: 200, timeout: 300, drops: drops)
        let recorded = 20_000
        for index in 0..<recorded { exporter.record(Self.record(index, padding: 2048)) }
        // record() returned for every span: none waited on the collector; the
        // ones past the buffer were counted before it returned.
        #expect(drops[.queueFull] > 0 && drops[.queueFull] == exporter.counts.droppedQueueFull, "\(drops.counts.withLock { $0 })")
        #expect(await eventually(30) { drops[.exportFailed] >= 200 }, "no stuck batch was given up on")
        #expect(await Self.finishes { exporter.shutdown(within: 1) } == false)
        let counts = exporter.counts
        #expect(counts.exported == 0)
        #expect(counts.dropped == recorded, "\(counts)")
        #expect(drops.total == recorded)
        // After the close: a span is dropped and counted at once.
        exporter.record(Self.record(0))
        #expect(drops.total == recorded + 1 && exporter.counts.droppedExportFailed == counts.droppedExportFailed + 1)
    }

    @Test("a drop never needs the exporter's thread: the callback runs inside record(), before it returns")
    func dropCountedInRecord() async throws {
        let stalled = try await Self.stalledListener()
        defer { stalled.child.terminate() }
        let drops = DropCounter()
        let exporter = Self.exporter(port: stalled.port, queue: 10, batch: 10, delay: 600_000, timeout: 60_000, drops: drops)
        // The thread sleeps (a 10-minute schedule delay; the batch of 10 wakes it once, then it is stuck on the collector).
        for index in 0..<10 { exporter.record(Self.record(index)) }
        #expect(await eventually(30) { exporter.counts.droppedQueueFull == 0 && drops.total == 0 })
        var before = drops[.queueFull]
        for index in 0..<100 {
            // The buffer may have room again once the thread took the first ten.
            exporter.record(Self.record(index))
            let after = drops[.queueFull]
            #expect(after == before || after == before + 1)
            #expect(after == exporter.counts.droppedQueueFull)
            before = after
        }
        #expect(drops[.queueFull] >= 80)
        _ = await Self.finishes { exporter.shutdown(within: 0.5) }
        #expect(exporter.counts.dropped + exporter.counts.exported == exporter.counts.recorded)
    }

    @Test("the close exports what is buffered: nothing went out before it (a 10-minute schedule delay), everything after")
    func closeFlushesTheBuffer() async throws {
        let file = NSTemporaryDirectory() + "otlp-flush-\(UUID().uuidString).jsonl"
        let receiver = try await Self.receiver(file)
        defer { receiver.child.terminate() }
        let drops = DropCounter()
        let exporter = Self.exporter(port: receiver.port, queue: 1000, batch: 1000, delay: 600_000, drops: drops)
        for index in 0..<250 { exporter.record(Self.record(index)) }
        #expect(exporter.counts.exported == 0 && Self.lines(file).isEmpty)
        #expect(await Self.finishes { exporter.shutdown(within: 20) })
        let counts = exporter.counts
        #expect(counts.recorded == 250 && counts.exported == 250 && counts.dropped == 0, "\(counts)")
        #expect(Self.lines(file).count == 250)
    }

    /// Counts the connections the exporter opens: one per request to a
    /// receiver that speaks HTTP/1.0 and closes each after its answer; one in
    /// all to a receiver that keeps them.
    final class CountingOpener: OTLPStreamOpener, @unchecked Sendable {
        private let opened = Mutex(0)
        var count: Int { opened.withLock { $0 } }

        func open(_ endpoint: OTLPEndpoint, deadline: OTLPDeadline) -> Result<any OTLPStream, OTLPExportFailure> {
            opened.withLock { $0 += 1 }
            return OTLPPlainOpener().open(endpoint, deadline: deadline)
        }
    }

    @Test(
        "spans queued as bytes leave in batches of max_export_batch_size: 100 spans of every size, queued before the thread starts, go out as 15 requests, each span whole and once; over one connection when the collector keeps it",
        arguments: [false, true])
    func queuedBytesSplitIntoBatches(keepAlive: Bool) async throws {
        let file = NSTemporaryDirectory() + "otlp-batches-\(UUID().uuidString).jsonl"
        let receiver = try await Self.receiver(file, keepAlive: keepAlive)
        defer { receiver.child.terminate() }
        let drops = DropCounter()
        let opener = CountingOpener()
        let configuration = OTLPExporter.Configuration(
            endpoint: OTLPEndpoint(url: "http://127.0.0.1:\(receiver.port)/v1/traces")!, headers: [], resource: [("service.name", "batches")],
            maximumQueueSize: 1000, maximumExportBatchSize: 7, scheduleDelayMilliseconds: 600_000, exportTimeoutMilliseconds: 5000)
        let exporter = OTLPExporter(
            configuration: configuration, opener: opener, scopeVersion: "test",
            logger: Logger(label: "otlp-test") { _ in SwiftLogNoOpLogHandler() }, dropped: drops.callback)
        // Sizes around the one- and two-byte lengths (127, 128, 16383, 16384), and none.
        let paddings = [0, 1, 100, 127, 128, 300, 16_383, 16_384, 40_000]
        for index in 0..<100 { exporter.record(Self.record(index, padding: paddings[index % paddings.count])) }
        // Started with all 100 waiting: the thread takes them in one swap and
        // splits them, 14 batches of 7 and one of 2.
        try exporter.start()
        #expect(await Self.finishes { exporter.shutdown(within: 20) })
        let counts = exporter.counts
        #expect(counts.recorded == 100 && counts.exported == 100 && counts.dropped == 0, "\(counts)")
        // A new TCP connection for every batch cost the relay 1 to 1.7 us a
        // send at the shipped batch size (docs/performance.md): a collector
        // that keeps the connection gets one for all 15.
        #expect(opener.count == (keepAlive ? 1 : 15))
        let spans = Self.lines(file)
        #expect(spans.count == 100)
        var seen = Set<Int>()
        for span in spans {
            let index = Int(try #require(span["attributes"]?["apns.attempt"]?.numberValue))
            seen.insert(index)
            #expect(span["span_id"]?.stringValue == String(format: "%016x", index + 1))
            #expect(span["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736")
            let padding = paddings[index % paddings.count]
            #expect(span["attributes"]?["padding"]?.stringValue?.count == (padding == 0 ? nil : padding), "span \(index)")
            #expect(span["name"] == "apns.attempt" && span["start_ns"] == 1 && span["end_ns"] == 2)
        }
        #expect(seen == Set(0..<100))
    }

    /// Runs a blocking call on a thread of its own (never the cooperative pool).
    static func finishes(_ work: @escaping @Sendable () -> Bool) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: work()) }
        }
    }
}
