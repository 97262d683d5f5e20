import Instrumentation
import Logging
import RelayJSON
import Synchronization
import Telemetry
import Testing
import Tracing
import RelayBasics

/// Every JSON line a sink received.
final class LineCollector: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    var sink: LogSink { LogSink { line in self.lines.withLock { $0.append(String(decoding: line, as: UTF8.self)) } } }
    func parsed() throws -> [JSONValue] { try all.map { try JSONParser.parse($0) } }
}

@Suite("JSON span tracer and log handler")
struct JSONTracerTests {
    @Test("a child span inherits the remote trace, and each span is one JSON line (at debug)")
    func spans() throws {
        let collector = LineCollector()
        let logger = Logger(label: "trace") { JSONLogHandler(label: $0, sink: collector.sink, level: .debug) }
        let tracer = JSONSpanTracer(logger: logger)
        var context = InstrumentationContext.topLevel
        tracer.extract([HTTPHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")], into: &context, using: HTTPHeaderPropagation())

        let send = tracer.startSpan("apns.send", context: context)
        send.attributes["apns.operation"] = "alert"
        let attempt = tracer.startSpan("apns.attempt", context: send.context)
        attempt.attributes["apns.status"] = 503
        attempt.setStatus(SpanStatus(code: .error, message: "ServiceUnavailable"))
        attempt.end()
        send.setStatus(SpanStatus(code: .ok))
        send.end()
        send.end()  // a second end is ignored

        let records = try collector.parsed()
        #expect(records.count == 2)
        let attemptRecord = records[0], sendRecord = records[1]
        #expect(sendRecord["name"] == "apns.send")
        #expect(sendRecord["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(sendRecord["parent_span_id"] == "00f067aa0ba902b7")
        #expect(sendRecord["status"] == "ok")
        #expect(sendRecord["attributes"]?["apns.operation"] == "alert")
        #expect(attemptRecord["parent_span_id"] == sendRecord["span_id"])
        #expect(attemptRecord["trace_id"] == sendRecord["trace_id"])
        #expect(attemptRecord["status"] == "error")
        #expect(attemptRecord["status_message"] == "ServiceUnavailable")
        #expect(attemptRecord["attributes"]?["apns.status"] == 503)
        #expect(attemptRecord["duration_ms"]?.numberValue.map { $0 >= 0 } == true)
        #expect(sendRecord["start"]?.stringValue?.hasSuffix("Z") == true)

        var headers: [HTTPHeader] = []
        tracer.inject(send.context, into: &headers, using: HTTPHeaderPropagation())
        #expect(headers.value(of: "traceparent") == "00-4bf92f3577b34da6a3ce929d0e0e4736-\(sendRecord["span_id"]!.stringValue!)-01")
    }

    @Test("below info nothing is written, so spans keep their ids but record nothing")
    func quietLogger() throws {
        let collector = LineCollector()
        let logger = Logger(label: "trace") { JSONLogHandler(label: $0, sink: collector.sink, level: .error) }
        let tracer = JSONSpanTracer(logger: logger)
        var context = InstrumentationContext.topLevel
        tracer.extract([HTTPHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")], into: &context, using: HTTPHeaderPropagation())
        let span = tracer.startSpan("apns.send", context: context)
        #expect(!span.isRecording)
        span.attributes["apns.operation"] = "alert"
        span.setStatus(SpanStatus(code: .error, message: "x"))
        span.addEvent("event")
        #expect(span.attributes.isEmpty)
        // The identity is kept: the audit row, the answer's traceparent and the log lines use it.
        #expect(span.identity.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(span.identity.parentSpanID == "00f067aa0ba902b7")
        let header = try #require(tracer.traceParentHeader(for: span.context))
        #expect(tracer.traceParent(for: span.context) == TraceParent(header: header))
        #expect(header == "00-4bf92f3577b34da6a3ce929d0e0e4736-\(span.identity.spanID)-01")
        span.end()
        #expect(collector.all.isEmpty)

        // At debug the same calls record, and the span is written.
        let loud = JSONSpanTracer(logger: Logger(label: "trace") { JSONLogHandler(label: $0, sink: collector.sink, level: .debug) })
        let written = loud.startSpan("apns.send", context: context)
        #expect(written.isRecording)
        written.attributes["apns.operation"] = "alert"
        written.setStatus(SpanStatus(code: .error, message: "BadDeviceToken"))
        written.end()
        #expect(!written.isRecording)
        #expect(try collector.parsed().first?["attributes"]?["apns.operation"] == "alert")
        #expect(try collector.parsed().first?["level"] == "debug")
    }

    @Test("at info no span records or writes, failed or not (the send's own line carries its ids and result, the audit row every attempt); at debug every span is written")
    func spansAtDebugOnly() throws {
        let collector = LineCollector()
        for level in [Logger.Level.info, .debug] {
            let tracer = JSONSpanTracer(logger: Logger(label: "trace") { JSONLogHandler(label: $0, sink: collector.sink, level: level) })
            let send = tracer.startSpan("apns.send", context: .topLevel)
            #expect(send.isRecording == (level == .debug))
            let good = tracer.startSpan("apns.attempt", context: send.context)
            good.setStatus(SpanStatus(code: .ok))
            good.end()
            let failed = tracer.startSpan("apns.attempt", context: send.context)
            failed.recordError(SpanTestError())
            failed.end()
            send.setStatus(SpanStatus(code: .error, message: "ServiceUnavailable"))
            send.end()
            if level == .info { #expect(collector.all.isEmpty, "\(collector.all)") }
        }
        let records = try collector.parsed()
        #expect(records.map { $0["name"]?.stringValue ?? "" } == ["apns.attempt", "apns.attempt", "apns.send"])
        #expect(records.allSatisfy { $0["level"] == "debug" })
        #expect(records[1]["errors"] != nil)
    }

    @Test("log lines written inside a span carry its trace id")
    func logCorrelation() async throws {
        let collector = LineCollector()
        let logger = Logger(label: "relay") { JSONLogHandler(label: $0, sink: collector.sink) }
        let tracer = JSONSpanTracer(logger: Logger(label: "spans") { _ in SwiftLogNoOpLogHandler() })
        let span = tracer.startSpan("apns.send", context: .topLevel)
        InstrumentationContext.$current.withValue(span.context) {
            logger.info("sending", metadata: ["attempt": .stringConvertible(1), "nested": ["b": "2", "a": "1"]])
        }
        span.end()
        let record = try #require(try collector.parsed().first)
        #expect(record["msg"] == "sending")
        #expect(record["level"] == "info")
        #expect(record["trace_id"]?.stringValue == span.identity.traceID)
        #expect(record["attempt"] == 1)
        #expect(record["nested"]?.objectValue?.keys == ["a", "b"])
    }
}

@Suite("JSON span tracer: traceparent without the header")
struct StoredTraceParentTests {
    @Test("traceParent(for:) reads what inject would write: the span's own, else the remote parent, else none")
    func sameAsInjected() throws {
        let tracer = JSONSpanTracer(logger: Logger(label: "quiet") { _ in SwiftLogNoOpLogHandler() })
        var remote = InstrumentationContext.topLevel
        tracer.extract([HTTPHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")], into: &remote, using: HTTPHeaderPropagation())
        let span = tracer.startSpan("apns.send", context: remote)
        let child = tracer.startSpan("apns.attempt", context: span.context)
        for context in [remote, span.context, child.context, InstrumentationContext.topLevel] {
            let injected = tracer.traceParentHeader(for: context).flatMap { TraceParent(header: $0) }
            #expect(tracer.traceParent(for: context) == injected)
            #expect(tracer.storedTraceParent(for: context) == injected)
        }
        #expect(tracer.traceParent(for: remote)?.description == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
        let own = try #require(tracer.traceParent(for: child.context))
        #expect(own.traceID == "4bf92f3577b34da6a3ce929d0e0e4736" && own.flags == 0 && own.spanID == child.identity.spanID)
        #expect(tracer.traceParent(for: .topLevel) == nil)
    }

    @Test("a span's own traceparent is what inject writes for its context, whether or not the context was read first")
    func carriedByTheSpan() throws {
        let tracer = JSONSpanTracer(logger: Logger(label: "quiet") { _ in SwiftLogNoOpLogHandler() })
        var remote = InstrumentationContext.topLevel
        tracer.extract([HTTPHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")], into: &remote, using: HTTPHeaderPropagation())
        for parent in [remote, InstrumentationContext.topLevel] {
            let span = tracer.startSpan("apns.send", context: parent)
            // Asked of the span before its context was ever made, then of the context.
            let carried = try #require(tracer.traceParent(ofSpan: span, context: span.context))
            #expect(carried == span.traceParent)
            #expect(tracer.traceParentHeader(for: span.context) == carried.description)
            #expect(span.context.spanIdentity == span.identity)
            let child = tracer.startSpan("apns.attempt", context: span.context)
            #expect(child.identity.traceID == carried.traceID && child.identity.parentSpanID == carried.spanID)
            #expect(tracer.traceParent(ofSpan: child, context: child.context) == tracer.traceParent(for: child.context))
        }
        // Not a carrying span: read from the context.
        #expect(tracer.traceParent(ofSpan: "not a span", context: remote)?.spanID == "00f067aa0ba902b7")
    }
}

struct SpanTestError: Error, CustomStringConvertible {
    var description: String { "the stream was reset" }
}
