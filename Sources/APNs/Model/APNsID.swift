import RelayBasics

/// The `apns-id` of a send: a lowercase UUID that names one logical send.
///
/// Every attempt of a send carries the same id, so APNs treats a retry as the
/// same notification and the audit row, the trace and Apple's delivery log
/// all correlate on it.
public struct APNsID: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The canonical lowercase 8-4-4-4-12 form.
    public let value: String

    /// A fresh random (version 4) id, from the kernel CSPRNG fetched in
    /// blocks (``SecureRandom``): one system call per 256 ids, not two per id.
    /// Its 16 bytes are taken at once, under one lock: the same bytes two
    /// draws of 8 would take.
    public static func random() -> APNsID {
        let (high, low) = draw()
        return formatted(high: high, low: low)
    }

    /// 16 bytes of the kernel CSPRNG, as two words.
    private static func draw() -> (high: UInt64, low: UInt64) {
        var drawn: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &drawn) { SecureRandom.fill($0) }
        return (UInt64(littleEndian: drawn.0), UInt64(littleEndian: drawn.1))
    }

    /// A fresh version 4 id drawn from `generator` (deterministic in tests).
    public static func random(using generator: inout some RandomNumberGenerator) -> APNsID {
        // Two 64-bit draws, not sixteen 8-bit ones: every send makes an id.
        let high = generator.next()
        let low = generator.next()
        return formatted(high: high, low: low)
    }

    /// Appends a fresh random id's 36 ASCII bytes (as ``random()`` draws and
    /// writes it) to `bytes`, with no string in between: a finished send's
    /// audit row id goes straight into its COPY line.
    public static func appendRandom(to bytes: inout [UInt8]) {
        let (high, low) = draw()
        append(high: high, low: low, to: &bytes)
    }

    /// Appends the 36 ASCII bytes of the version 4 id whose bytes are
    /// `high`'s then `low`'s, as ``random()`` writes the words it draws.
    /// Six bits of the words are the version and variant: bits 52–55 of
    /// `high` and bits 6–7 of `low` do not reach the text.
    public static func append(high: UInt64, low: UInt64, to bytes: inout [UInt8]) {
        let (high, low) = versioned(high: high, low: low)
        Hex.appendUUID(high: high, low: low, to: &bytes)
    }

    /// The id whose bytes are `high`'s then `low`'s, each low byte first,
    /// with the version 4 and RFC 4122 variant bits set; written as hex
    /// straight into the string (no byte array in between: every send makes one).
    private static func formatted(high: UInt64, low: UInt64) -> APNsID {
        APNsID(uncheckedValue: String(unsafeUninitializedCapacity: 36) { write(high: high, low: low, into: $0) })
    }

    /// Writes the id of `high` and `low` (see ``formatted(high:low:)``) into
    /// the first 36 bytes of `text` and returns 36.
    private static func write(high: UInt64, low: UInt64, into text: UnsafeMutableBufferPointer<UInt8>) -> Int {
        let (high, low) = versioned(high: high, low: low)
        return Hex.writeUUID(high: high, low: low, into: text)
    }

    /// The words with the version 4 bits set on byte 6 (of `high`, low byte
    /// first) and the RFC 4122 variant bits on byte 8 (`low`'s first).
    private static func versioned(high: UInt64, low: UInt64) -> (high: UInt64, low: UInt64) {
        ((high & ~(0xF0 << 48)) | (0x40 << 48), (low & ~0xC0) | 0x80)
    }

    /// Parses a caller-supplied id: any case, canonical hyphenation; stored lowercase.
    public init?(_ text: String) {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return nil }
        for (position, byte) in utf8.enumerated() {
            if [8, 13, 18, 23].contains(position) {
                guard byte == UInt8(ascii: "-") else { return nil }
            } else {
                guard Hex.isDigit(byte) else { return nil }
            }
        }
        value = text.lowercased()
    }

    private init(uncheckedValue: String) { value = uncheckedValue }

    public var description: String { value }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let id = APNsID(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a UUID: \(text)"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }
}
