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
        // Byte by byte, no splitting: every send reads its span's trace id back from this form.
        var header = header
        guard let parsed = header.withUTF8({ Self.parse($0) }) else { return nil }
        self = parsed
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> TraceParent? {
        let dash = UInt8(ascii: "-")
        // version "-" trace id "-" parent id "-" flags, then (later versions only) "-" and more.
        guard bytes.count >= 55, bytes[2] == dash, bytes[35] == dash, bytes[52] == dash,
              isLowercaseHex(bytes, 0..<2), isLowercaseHex(bytes, 3..<35), isLowercaseHex(bytes, 36..<52), isLowercaseHex(bytes, 53..<55)
        else { return nil }
        let version = bytes[0..<2]
        guard !version.elementsEqual("ff".utf8) else { return nil }
        // Version 00 has exactly four fields; later versions may append more after a dash.
        if version.elementsEqual("00".utf8) {
            guard bytes.count == 55 else { return nil }
        } else if bytes.count > 55 {
            guard bytes[55] == dash else { return nil }
        }
        guard bytes[3..<35].contains(where: { $0 != UInt8(ascii: "0") }), bytes[36..<52].contains(where: { $0 != UInt8(ascii: "0") })
        else { return nil }
        let flags = Hex.value(of: bytes[53])! << 4 | Hex.value(of: bytes[54])!
        return TraceParent(
            traceID: String(decoding: UnsafeBufferPointer(rebasing: bytes[3..<35]), as: UTF8.self),
            spanID: String(decoding: UnsafeBufferPointer(rebasing: bytes[36..<52]), as: UTF8.self), flags: flags)
    }

    private static func isLowercaseHex(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Bool {
        bytes[range].allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    /// The header value, version 00.
    public var description: String {
        // Written into the string's own storage: the header is made for every answer.
        let count = 3 + traceID.utf8.count + 1 + spanID.utf8.count + 3
        return String(unsafeUninitializedCapacity: count) { text in
            var position = 0
            func append<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
                for byte in bytes {
                    text[position] = byte
                    position += 1
                }
            }
            append("00-".utf8)
            append(traceID.utf8)
            append(CollectionOfOne(UInt8(ascii: "-")))
            append(spanID.utf8)
            append(CollectionOfOne(UInt8(ascii: "-")))
            append(CollectionOfOne(Hex.digit(flags >> 4)))
            append(CollectionOfOne(Hex.digit(flags & 0x0F)))
            return position
        }
    }

    public var isSampled: Bool { flags & 1 == 1 }

    /// A fresh random trace id.
    public static func randomTraceID() -> String { randomHex(bytes: 16) }
    /// A fresh random span id.
    public static func randomSpanID() -> String { randomHex(bytes: 8) }

    /// Random ids from ``SecureRandom`` (the kernel CSPRNG, fetched in
    /// blocks): span ids are minted on every request.
    static func randomHex(bytes: Int) -> String {
        precondition(bytes <= 16)
        var random: (UInt64, UInt64) = (0, 0)
        return withUnsafeMutableBytes(of: &random) { raw in
            let drawn = UnsafeMutableRawBufferPointer(rebasing: raw[0..<bytes])
            while true {
                SecureRandom.fill(drawn)
                // All zeros is W3C's "invalid" id: draw again.
                if drawn.contains(where: { $0 != 0 }) { break }
            }
            return String(unsafeUninitializedCapacity: bytes * 2) { text in
                for (index, byte) in drawn.enumerated() {
                    text[2 * index] = Hex.digit(byte >> 4)
                    text[2 * index + 1] = Hex.digit(byte & 0x0F)
                }
                return bytes * 2
            }
        }
    }
}
