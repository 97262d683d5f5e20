public import RelayBasics

/// Which new spans are recorded and exported: OpenTelemetry's built-in
/// samplers (`OTEL_TRACES_SAMPLER`: always_on, always_off, traceidratio and
/// their parentbased_ forms), decided once per span when it starts.
public struct OTLPSampler: Sendable, Equatable, CustomStringConvertible {
    public enum Root: Sendable, Equatable {
        case alwaysOn, alwaysOff
        /// A share of traces, decided from the trace id (the same for every span of a trace).
        case traceIDRatio(Double)
    }

    /// What decides for a trace the relay starts (and, unless ``parentBased``, for every span).
    public var root: Root
    /// A parent (local, or remote from `traceparent`) decides by its sampled flag.
    public var parentBased: Bool

    public init(root: Root, parentBased: Bool) {
        self.root = root
        self.parentBased = parentBased
    }

    /// - Parameter parentSampled: the parent's sampled flag; nil for a root span.
    public func isSampled(traceID: String, parentSampled: Bool?) -> Bool {
        if parentBased, let parentSampled { return parentSampled }
        switch root {
        case .alwaysOn: return true
        case .alwaysOff: return false
        case .traceIDRatio(let ratio):
            if ratio >= 1 { return true }
            if ratio <= 0 { return false }
            // As the specification's TraceIdRatioBased: the id's last 8 bytes against the ratio's share of 2^64.
            guard let low = UInt64(traceID.suffix(16), radix: 16) else { return false }
            return Double(low) < ratio * 18_446_744_073_709_551_616.0
        }
    }

    public var description: String {
        let base: String
        switch root {
        case .alwaysOn: base = "always_on"
        case .alwaysOff: base = "always_off"
        case .traceIDRatio(let ratio): base = "traceidratio(\(ratio))"
        }
        return parentBased ? "parentbased_\(base)" : base
    }
}
