import APNs
import RelayBasics
import Synchronization

/// The id of a finished send's row: ``APNsID``'s version 4 form, drawn
/// once per process and counted from there, not drawn per row.
///
/// The words are a random prefix (`high`, 60 random bits once the version
/// is set) and a random start (`low`) that each row adds its number to,
/// shifted past the 8 bits the variant overwrites: 2^56 rows per process
/// before the count wraps. Two processes (a restart, a second replica)
/// share ids only if they drew the same 60-bit prefix, and the table's key
/// is the id with `recorded_at`. What the id needs is uniqueness: the row
/// is found by its apns-id, and the id is written into the journal record,
/// so a replayed row keeps it. Drawing 16 bytes under ``SecureRandom``'s
/// lock for every row cost ~1,100 instructions a send (issue 26).
enum AuditRowID {
    /// This process's random words.
    private static let base: (high: UInt64, low: UInt64) = {
        var words: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &words) { SecureRandom.fill($0) }
        return words
    }()

    /// Rows numbered so far by this process.
    private static let count = Atomic<UInt64>(0)

    /// The words of the next id: `base` with the row's number added above the variant's byte.
    static func nextWords() -> (high: UInt64, low: UInt64) {
        let number = count.wrappingAdd(1, ordering: .relaxed).oldValue
        return (base.high, base.low &+ (number &<< 8))
    }

    /// Appends the next id's 36 bytes (no byte of them needs COPY escaping).
    static func appendNext(to bytes: inout [UInt8]) {
        let words = nextWords()
        append(high: words.high, low: words.low, to: &bytes)
    }

    /// ``APNsID/append(high:low:to:)``'s bytes (held to it in a test), two
    /// hex digits a byte from a table, on the stack, appended once: the
    /// digit at a time with its dash and version checks was ~800
    /// instructions an id.
    static func append(high: UInt64, low: UInt64, to bytes: inout [UInt8]) {
        // The version 4 and RFC 4122 variant bits, as APNsID sets them on
        // its byte 6 (of `high`, low byte first) and byte 8 (`low`'s first).
        let high = (high & ~(0xF0 << 48)) | (0x40 << 48)
        let low = (low & ~0xC0) | 0x80
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { out in
            hexPairs.withUnsafeBufferPointer { pairs in
                var position = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        out[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    let byte = Int(truncatingIfNeeded: ((index < 8 ? high : low) >> (8 * UInt64(index & 7))) & 0xFF)
                    out[position] = pairs[2 * byte]
                    out[position + 1] = pairs[2 * byte + 1]
                    position += 2
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(out))
        }
    }

    /// The two lowercase hex digits of each byte value, in order.
    private static let hexPairs: [UInt8] = (0..<256).flatMap { byte in
        [Hex.digit(UInt8(byte >> 4)), Hex.digit(UInt8(byte & 0x0F))]
    }
}
