/// Base-16 text for bytes: lowercase out, either case in, ASCII only.
///
/// Hex appears wherever the relay names bytes in text (SHA-256 fingerprints,
/// API key hashes, apns-ids, trace ids, `%XX` escapes in request targets);
/// this is its one encoder and decoder. ASCII only on purpose: `Character`'s
/// `isHexDigit` also accepts fullwidth digits, which no wire format does.
public enum Hex {
    /// `bytes` as lowercase hex, two digits per byte.
    // Inlinable: specialised where it is called (a fingerprint per send, ids),
    // instead of walking an unknown sequence through its witness table.
    @inlinable
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes { append(byte, to: &text) }
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends `byte`'s two lowercase digits to `text` (for callers that build
    /// a larger ASCII buffer, such as an apns-id, without an intermediate String).
    @inlinable
    public static func append(_ byte: UInt8, to text: inout [UInt8]) {
        text.append(digit(byte >> 4))
        text.append(digit(byte & 0x0F))
    }

    /// The bytes `text` spells, or nil when its length is odd or any character
    /// is not a hex digit. Either case is accepted.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = value(of: utf8[index]), let low = value(of: utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    /// The value (0–15) of one ASCII hex digit of either case, or nil.
    @inlinable
    public static func value(of digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Whether `byte` is an ASCII hex digit of either case.
    @inlinable
    public static func isDigit(_ byte: UInt8) -> Bool { value(of: byte) != nil }

    /// Whether every character of `text` is `0-9` or `a-f` (the canonical
    /// lowercase form W3C trace ids require). True for empty text.
    public static func isLowercase(_ text: some StringProtocol) -> Bool {
        text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    /// Writes the 36 ASCII bytes of UUID text (8-4-4-4-12, lowercase) whose
    /// 16 bytes are `high`'s then `low`'s, each word low byte first, into
    /// the first 36 bytes of `text`, and returns 36. No bit is changed: a
    /// caller wanting a version or variant sets it on the words first.
    ///
    /// The one writer of such ids: the apns-ids a send draws, the audit's
    /// row ids and its ids derived from a journal key. Two digits a byte
    /// from a table (a digit at a time was ~800 instructions an id, and
    /// every send writes at least two).
    public static func writeUUID(high: UInt64, low: UInt64, into text: UnsafeMutableBufferPointer<UInt8>) -> Int {
        precondition(text.count >= 36, "a UUID's text is 36 bytes")
        return digitPairs.withUnsafeBufferPointer { pairs in
            var position = 0
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    text[position] = UInt8(ascii: "-")
                    position += 1
                }
                let byte = Int(truncatingIfNeeded: ((index < 8 ? high : low) >> (8 * UInt64(index & 7))) & 0xFF)
                text[position] = pairs[2 * byte]
                text[position + 1] = pairs[2 * byte + 1]
                position += 2
            }
            return position
        }
    }

    /// Appends ``writeUUID(high:low:into:)``'s 36 bytes to `bytes` with one append.
    public static func appendUUID(high: UInt64, low: UInt64, to bytes: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { out in
            _ = writeUUID(high: high, low: low, into: out)
            bytes.append(contentsOf: UnsafeBufferPointer(out))
        }
    }

    /// The two lowercase digits of each byte value, in order.
    private static let digitPairs: [UInt8] = (0..<256).flatMap { byte in
        [digit(UInt8(byte >> 4)), digit(UInt8(byte & 0x0F))]
    }

    /// The lowercase ASCII digit of a nibble (0–15).
    @inlinable
    public static func digit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
