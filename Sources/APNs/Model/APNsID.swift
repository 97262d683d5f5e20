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
    public static func random() -> APNsID {
        var generator = SecureRandom()
        return random(using: &generator)
    }

    /// A fresh version 4 id drawn from `generator` (deterministic in tests).
    public static func random(using generator: inout some RandomNumberGenerator) -> APNsID {
        // Two 64-bit draws, not sixteen 8-bit ones: every send makes an id.
        let high = generator.next()
        let low = generator.next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            bytes[index] = UInt8(truncatingIfNeeded: high >> (8 * UInt64(index)))
            bytes[8 + index] = UInt8(truncatingIfNeeded: low >> (8 * UInt64(index)))
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x40  // version 4
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 4122 variant
        // Hex straight into one buffer: this runs on every send.
        let text = String(unsafeUninitializedCapacity: 36) { text in
            var position = 0
            for (index, byte) in bytes.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    text[position] = UInt8(ascii: "-")
                    position += 1
                }
                text[position] = Hex.digit(byte >> 4)
                text[position + 1] = Hex.digit(byte & 0x0F)
                position += 2
            }
            return position
        }
        return APNsID(uncheckedValue: text)
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
