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

    /// An id as its two words: what the journal's completion record holds
    /// (``JournalSendCodec``), written as text only when its row is.
    struct Words: Equatable {
        var high: UInt64
        var low: UInt64

        /// Appends the id's 36 bytes (no byte of them needs COPY escaping).
        func append(to bytes: inout [UInt8]) {
            APNsID.append(high: high, low: low, to: &bytes)
        }
    }

    /// The words of the next id: `base` with the row's number added above the variant's byte.
    static func nextWords() -> Words {
        let number = count.wrappingAdd(1, ordering: .relaxed).oldValue
        return Words(high: base.high, low: base.low &+ (number &<< 8))
    }

    /// Appends the next id's 36 bytes (no byte of them needs COPY escaping).
    static func appendNext(to bytes: inout [UInt8]) {
        nextWords().append(to: &bytes)
    }
}
