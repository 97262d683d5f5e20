/// A W3C Trace Context `traceparent` value: which trace a request belongs to
/// and which span is its parent.
///
/// `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`. Backends send it
/// on the ingress; the relay makes its `apns.send` span a child of it and
/// answers with its own. This is the one parser and formatter of the value;
/// ``HTTPHeaderPropagation`` carries it in headers.
public struct TraceParent: Sendable, Hashable, CustomStringConvertible {
    /// The header's name.
    public static let headerName = "traceparent"

    /// 32 lowercase hex digits, not all zero.
    public var traceID: String
    /// 16 lowercase hex digits, not all zero.
    public var spanID: String
    /// Bit 0 is "sampled".
    public var flags: UInt8

    public init(traceID: String, spanID: String, flags: UInt8 = 1) {
        self.traceID = traceID
        self.spanID = spanID
        self.flags = flags
    }

    /// Parses a header value; nil when it breaks the W3C format (a bad
    /// header starts a new trace rather than failing the request).
    public init?(header: String) {
        let parts = header.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 4, parts[0].count == 2, Hex.isLowercase(parts[0]), parts[0] != "ff" else { return nil }
        // Version 00 has exactly four fields; later versions may append more.
        if parts[0] == "00", parts.count != 4 { return nil }
        guard parts[1].count == 32, Hex.isLowercase(parts[1]), parts[1] != String(repeating: "0", count: 32),
              parts[2].count == 16, Hex.isLowercase(parts[2]), parts[2] != String(repeating: "0", count: 16),
              parts[3].count == 2, Hex.isLowercase(parts[3]), let flags = UInt8(parts[3], radix: 16)
        else { return nil }
        self.init(traceID: parts[1], spanID: parts[2], flags: flags)
    }

    /// The header value, version 00.
    public var description: String {
        let flagText = String(flags, radix: 16)
        return "00-\(traceID)-\(spanID)-\(flags < 16 ? "0" : "")\(flagText)"
    }

    public var isSampled: Bool { flags & 1 == 1 }

    /// A fresh random trace id.
    public static func randomTraceID() -> String { randomHex(bytes: 16) }
    /// A fresh random span id.
    public static func randomSpanID() -> String { randomHex(bytes: 8) }

    /// Random ids drawn 64 bits at a time: one getrandom call per 8 bytes,
    /// not per byte (span ids are minted on every request).
    static func randomHex(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        while true {
            var text: [UInt8] = []
            text.reserveCapacity(bytes * 2)
            var word: UInt64 = 0
            for index in 0..<bytes {
                if index % 8 == 0 { word = generator.next() }
                Hex.append(UInt8(truncatingIfNeeded: word >> (UInt64(index % 8) * 8)), to: &text)
            }
            // All zeros is W3C's "invalid" id: draw again.
            if text.contains(where: { $0 != UInt8(ascii: "0") }) { return String(decoding: text, as: UTF8.self) }
        }
    }
}
