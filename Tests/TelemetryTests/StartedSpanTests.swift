import Instrumentation
import Logging
import Relay
import RelayBasics
import Telemetry
import Testing
import Tracing

@Suite("StartedSpan: the relay's tracers answer at the start what the send path asked each span by a cast")
struct StartedSpanTests {
    /// A caller's sampled and unsampled traceparent, and none.
    static func parents(_ tracer: some Tracer) -> [InstrumentationContext] {
        ["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", nil]
            .map { header in
                var context = InstrumentationContext.topLevel
                if let header { tracer.extract([HTTPHeader("traceparent", header)], into: &context, using: HTTPHeaderPropagation()) }
                return context
            }
    }

    /// What the casts gave before: the traceparent injected for the span's
    /// context, a writer exactly when the span records, a child starter only
    /// from a span that is one.
    static func checkAnswers(_ started: StartedSpan, _ tracer: some Tracer, parent: InstrumentationContext) throws {
        let injected = try #require(tracer.traceParentHeader(for: started.span.context).flatMap { TraceParent(header: $0) })
        #expect(started.traceParent == injected)
        #expect(started.traceParent == tracer.traceParent(ofSpan: started.span, context: started.span.context))
        #expect((started.attributes != nil) == started.span.isRecording)
        if let remote = parent.remoteParent {
            #expect(started.traceParent?.traceID == remote.traceID)
        }
        if let children = started.children {
            #expect(children as AnyObject === started.span as AnyObject)
            #expect(started.span.isRecording)
            #expect(started.span is any ChildSpanStarting)
        } else {
            #expect(!(started.span.isRecording && started.span is any ChildSpanStarting))
        }
    }

    @Test("the log exporter's spans, recording (debug) or not (info), for every parent: the same traceparent, a writer only when recording, no child starter")
    func jsonSpans() throws {
        for level in [Logger.Level.info, .debug] {
            let collector = LineCollector()
            let tracer = JSONSpanTracer(logger: Logger(label: "started") { JSONLogHandler(label: $0, sink: collector.sink, level: level) })
            for parent in Self.parents(tracer) {
                let started = tracer.startRelaySpan("apns.send", context: parent, ofKind: .client)
                #expect(started.span.isRecording == (level == .debug))
                #expect(started.children == nil)
                try Self.checkAnswers(started, tracer, parent: parent)
                started.span.end()
            }
        }
    }

    @Test("SpanStarter: the relay's tracers start through startRelaySpan; any other tracer by the casts (a no-op tracer: no traceparent, no writer, no child starter)")
    func starter() throws {
        let collector = LineCollector()
        let tracer = JSONSpanTracer(logger: Logger(label: "started") { JSONLogHandler(label: $0, sink: collector.sink, level: .debug) })
        for parent in Self.parents(tracer) {
            let started = SpanStarter(tracer).start("apns.send", context: parent, ofKind: .client)
            #expect(started.span is JSONSpan && started.attributes != nil && started.children == nil)
            try Self.checkAnswers(started, tracer, parent: parent)
            started.span.end()
        }
        let quiet = SpanStarter(NoOpTracer()).start("apns.send", context: .topLevel, ofKind: .client)
        #expect(quiet.traceParent == nil && quiet.attributes == nil && quiet.children == nil && !quiet.span.isRecording)
    }

    @Test("OTLP spans, sampled or not, for every parent: the same traceparent, and a sampled one is its own writer and child starter")
    func otlpSpans() throws {
        let exporter = OTLPExporter(
            configuration: OTLPExporter.Configuration(
                endpoint: OTLPEndpoint(url: "http://127.0.0.1:1/v1/traces")!, headers: [], resource: [("service.name", "started")],
                maximumQueueSize: 64, maximumExportBatchSize: 64, scheduleDelayMilliseconds: 1000, exportTimeoutMilliseconds: 1000),
            opener: OTLPPlainOpener(), scopeVersion: "test", logger: Logger(label: "started") { _ in SwiftLogNoOpLogHandler() },
            dropped: { _, _ in })
        for root in [OTLPSampler.Root.alwaysOn, .alwaysOff] {
            let tracer = OTLPTracer(exporter: exporter, sampler: OTLPSampler(root: root, parentBased: true))
            for parent in Self.parents(tracer) {
                let started = tracer.startRelaySpan("apns.send", context: parent, ofKind: .client)
                let sampled = parent.remoteParent?.isSampled ?? (root == .alwaysOn)
                #expect(started.span.isRecording == sampled)
                #expect((started.children != nil) == sampled)
                try Self.checkAnswers(started, tracer, parent: parent)
                // A child from the starter is the child startSpan(context: span.context) gives.
                if let children = started.children {
                    let child = children.startChild("apns.attempt", ofKind: .client)
                    let viaContext = tracer.startSpan("apns.attempt", context: started.span.context, ofKind: .client)
                    let childParent = tracer.traceParent(ofSpan: child, context: child.context)
                    let contextParent = tracer.traceParent(ofSpan: viaContext, context: viaContext.context)
                    #expect(childParent?.traceID == contextParent?.traceID && childParent?.flags == contextParent?.flags)
                    #expect(child.isRecording == viaContext.isRecording)
                }
                started.span.end()
            }
        }
        exporter.shutdown(within: 0.1)
    }
}
