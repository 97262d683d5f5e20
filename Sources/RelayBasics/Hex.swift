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

    /// The lowercase ASCII digit of a nibble (0–15).
    @inlinable
    public static func digit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
