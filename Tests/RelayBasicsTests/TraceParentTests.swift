import Instrumentation
import RelayBasics
import Testing
import Tracing

@Suite("W3C traceparent")
struct TraceParentTests {
    @Test("parses and formats version 00")
    func roundTrip() throws {
        let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let parent = try #require(TraceParent(header: header))
        #expect(parent.traceID == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(parent.spanID == "00f067aa0ba902b7")
        #expect(parent.isSampled)
        #expect(parent.description == header)
    }

    @Test(
        "rejects malformed values",
        arguments: [
            "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ]
    )
    func rejects(header: String) {
        #expect(TraceParent(header: header) == nil)
    }

    @Test("formats flags as two lowercase hex digits; unsampled is 00")
    func flags() {
        let id = "4bf92f3577b34da6a3ce929d0e0e4736", span = "00f067aa0ba902b7"
        #expect(TraceParent(traceID: id, spanID: span, flags: 0).description == "00-\(id)-\(span)-00")
        #expect(!TraceParent(traceID: id, spanID: span, flags: 0).isSampled)
        #expect(TraceParent(traceID: id, spanID: span, flags: 0xAB).description == "00-\(id)-\(span)-ab")
        #expect(TraceParent(header: "00-\(id)-\(span)-ab")?.flags == 0xAB)
    }

    @Test("a later version's extra fields are allowed, version 00's are not")
    func versions() {
        let id = "4bf92f3577b34da6a3ce929d0e0e4736", span = "00f067aa0ba902b7"
        #expect(TraceParent(header: "01-\(id)-\(span)-01-future")?.traceID == id)
        #expect(TraceParent(header: "00-\(id)-\(span)-01-future") == nil)
    }

    @Test("random ids are lowercase hex of the W3C lengths, never all zeros, and differ")
    func randomIDs() {
        let traces = (0..<100).map { _ in TraceParent.randomTraceID() }
        let spans = (0..<100).map { _ in TraceParent.randomSpanID() }
        #expect(traces.allSatisfy { $0.count == 32 && Hex.isLowercase($0) && $0 != String(repeating: "0", count: 32) })
        #expect(spans.allSatisfy { $0.count == 16 && Hex.isLowercase($0) && $0 != String(repeating: "0", count: 16) })
        #expect(Set(traces).count == 100)
        #expect(Set(spans).count == 100)
        #expect(TraceParent(header: TraceParent(traceID: traces[0], spanID: spans[0]).description) != nil)
    }
}

/// A tracer that injects a fixed traceparent, as any W3C tracer would, so the
/// propagation is tested without Telemetry's tracer.
private struct FixedTraceInstrument: Instrument {
    let value: String?
    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout InstrumentationContext, using extractor: Extract)
    where Extract.Carrier == Carrier {}
    func inject<Carrier, Inject: Injector>(_ context: InstrumentationContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        if let value { injector.inject(value, forKey: "TraceParent", into: &carrier) }
    }
}

@Suite("traceparent propagation in headers")
struct TraceParentPropagationTests {
    @Test("injection writes one lowercase traceparent header, replacing an older one")
    func inject() {
        var headers = [HTTPHeader("content-type", "application/json"), HTTPHeader("traceparent", "old")]
        HTTPHeaderPropagation().inject("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", forKey: "TraceParent", into: &headers)
        #expect(headers == [
            HTTPHeader("content-type", "application/json"),
            HTTPHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ])
    }

    @Test("extraction reads the header in any case")
    func extract() {
        let headers = [HTTPHeader("TraceParent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")]
        #expect(HTTPHeaderPropagation().extract(key: "traceparent", from: headers) == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        #expect(HTTPHeaderPropagation().extract(key: "tracestate", from: headers) == nil)
    }

    @Test("an instrument's traceparent for a context is what it injects, or nil when it injects none")
    func traceParentHeader() {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        #expect(FixedTraceInstrument(value: value).traceParentHeader(for: .topLevel) == value)
        #expect(FixedTraceInstrument(value: nil).traceParentHeader(for: .topLevel) == nil)
        #expect(NoOpTracer().traceParentHeader(for: .topLevel) == nil)
    }
}
