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

/// The byte-by-byte parser against the split-based one it replaced, on
/// valid headers and on every one-byte change of them.
@Suite("traceparent parser against its reference")
struct TraceParentReferenceTests {
    /// The parser as it was: split on "-", then each field checked.
    static func reference(_ header: String) -> TraceParent? {
        let parts = header.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 4, parts[0].count == 2, Hex.isLowercase(parts[0]), parts[0] != "ff" else { return nil }
        if parts[0] == "00", parts.count != 4 { return nil }
        guard parts[1].count == 32, Hex.isLowercase(parts[1]), parts[1] != String(repeating: "0", count: 32),
              parts[2].count == 16, Hex.isLowercase(parts[2]), parts[2] != String(repeating: "0", count: 16),
              parts[3].count == 2, Hex.isLowercase(parts[3]), let flags = UInt8(parts[3], radix: 16)
        else { return nil }
        return TraceParent(traceID: parts[1], spanID: parts[2], flags: flags)
    }

    @Test("agrees on every one-byte change of valid headers of versions 00 and 01")
    func mutations() {
        let id = "4bf92f3577b34da6a3ce929d0e0e4736", span = "00f067aa0ba902b7"
        let seeds = ["00-\(id)-\(span)-01", "01-\(id)-\(span)-00", "01-\(id)-\(span)-ab-extra", "cc-\(id)-\(span)-01-"]
        let replacements: [UInt8] = Array("0afgA-xé".utf8) + [0x00, 0x7F]
        var checked = 0
        for seed in seeds {
            let bytes = Array(seed.utf8)
            #expect(TraceParent(header: seed) == Self.reference(seed))
            for index in bytes.indices {
                for replacement in replacements {
                    var changed = bytes
                    changed[index] = replacement
                    let text = String(decoding: changed, as: UTF8.self)
                    #expect(TraceParent(header: text) == Self.reference(text), "\(text)")
                    checked += 1
                }
                var shorter = bytes
                shorter.remove(at: index)
                let text = String(decoding: shorter, as: UTF8.self)
                #expect(TraceParent(header: text) == Self.reference(text), "\(text)")
                var longer = bytes
                longer.insert(UInt8(ascii: "0"), at: index)
                let longerText = String(decoding: longer, as: UTF8.self)
                #expect(TraceParent(header: longerText) == Self.reference(longerText), "\(longerText)")
            }
        }
        #expect(checked > 1000)
    }

    @Test("the all-zero ids and version ff are refused, any later version's suffix needs a dash")
    func edges() {
        let id = "4bf92f3577b34da6a3ce929d0e0e4736", span = "00f067aa0ba902b7"
        for header in ["00-\(id)-\(span)-01x", "01-\(id)-\(span)-01x", "ff-\(id)-\(span)-01", "00-\(id)-\(span)-0"] {
            #expect(TraceParent(header: header) == nil)
            #expect(Self.reference(header) == nil)
        }
        #expect(TraceParent(header: "02-\(id)-\(span)-01-") != nil)
        #expect(Self.reference("02-\(id)-\(span)-01-") != nil)
    }
}
