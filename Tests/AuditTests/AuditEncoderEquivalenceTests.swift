@testable import Audit
import APNs
import RelayBasics
import Testing

/// The audit's hand-written encoders (issue 26: fewer instructions per
/// send) against the encoders they replaced, kept here as the oracle: a
/// journal, a spool segment or the table already holds bytes the old ones
/// wrote, so not one may differ.
@Suite("Audit encoders, old and new")
struct AuditEncoderEquivalenceTests {
    /// The row id's text as it was written before: a byte at a time through
    /// `Hex.append`, the two hashes walked as an array.
    static func oldDerivedID(_ key: [UInt8]) -> String {
        func fnv(_ seed: UInt64) -> UInt64 {
            var hash = seed
            for byte in key {
                hash ^= UInt64(byte)
                hash = hash &* 0x100_0000_01b3
            }
            return hash
        }
        let high = fnv(0xcbf2_9ce4_8422_2325)
        let low = fnv(0x84222325_cbf29ce4 ^ 0x5bd1_e995)
        var text: [UInt8] = []
        for (index, word) in [high, low].enumerated() {
            for shift in stride(from: 56, through: 0, by: -8) {
                let position = index * 8 + (56 - shift) / 8
                if position == 4 || position == 6 || position == 8 || position == 10 { text.append(UInt8(ascii: "-")) }
                Hex.append(UInt8(truncatingIfNeeded: word >> UInt64(shift)), to: &text)
            }
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// A timestamp as it was written before: a digit at a time.
    static func oldTimestamp(milliseconds: Int64) -> String {
        var text: [UInt8] = []
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let millisecond = milliseconds - seconds * 1000
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = CivilDate.date(days: days)
        func digits(_ value: Int64, _ width: Int) {
            if value < 0 { text.append(UInt8(ascii: "-")) }
            let magnitude = value.magnitude
            var divisor: UInt64 = 1
            for _ in 1..<width { divisor *= 10 }
            while divisor <= magnitude / 10 { divisor *= 10 }
            var rest = magnitude
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(year, 4); text.append(UInt8(ascii: "-")); digits(month, 2); text.append(UInt8(ascii: "-")); digits(day, 2)
        text.append(UInt8(ascii: "T")); digits(secondOfDay / 3600, 2); text.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2); text.append(UInt8(ascii: ":")); digits(secondOfDay % 60, 2)
        text.append(UInt8(ascii: ".")); digits(millisecond, 3); text.append(UInt8(ascii: "Z"))
        return String(decoding: text, as: UTF8.self)
    }

    static let keys: [String] = [
        "", "a", "6e1f0a4c-0000-4000-8000-000000000001/1763800000000000000",
        "7d3e5c2a-0f4b-4c8d-9e1a-2b3c4d5e6f70/0", "7d3e5c2a-0f4b-4c8d-9e1a-2b3c4d5e6f70/18446744073709551615",
        "é日本/1", "tab\there/2", "nul\u{0}/3", String(repeating: "long key é\\\n", count: 300),
    ]

    @Test("the row id derived from a key is the old encoder's text, for awkward and long keys")
    func derivedIDMatchesOld() {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<500).map { _ in
            String(decoding: (0..<Int.random(in: 0...80, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }, as: UTF8.self)
        }
        for key in Self.keys + random {
            let bytes = Array(key.utf8)
            #expect(AuditRecord.derivedID(key) == Self.oldDerivedID(bytes), "\(key)")
            // As the journal takes it: hashed in place, in the record after other bytes.
            let record = Array("prefix".utf8) + bytes
            let words = record.withUnsafeBufferPointer { AuditRecord.derivedIDWords(of: UnsafeBufferPointer(rebasing: $0[6...])) }
            var text = Array("x".utf8)
            AuditRecord.appendDerivedID(high: words.high, low: words.low, to: &text)
            #expect(text == Array(("x" + Self.oldDerivedID(bytes)).utf8))
        }
    }

    @Test("a timestamp is the old digit-by-digit text, from year 0 to past 9999 and before 1970")
    func timestampMatchesOld() {
        var generator = SystemRandomNumberGenerator()
        let edges: [Int64] = [
            0, -1, 1, 999, 1000, -999, -1000, -1001, 86_399_999, -86_400_000, 951_782_400_000, 4_107_542_400_000,
            -62_167_219_200_000,  // 0000-01-01
            -62_167_219_200_001,  // the millisecond before: year -1, the general path
            253_402_300_799_999, 253_402_300_800_000, Int64(UInt64.max / 1_000_000),
        ]
        let random = (0..<5000).map { _ in Int64.random(in: -70_000_000_000_000...300_000_000_000_000, using: &generator) }
        for milliseconds in edges + random {
            #expect(RFC3339.format(milliseconds: milliseconds) == Self.oldTimestamp(milliseconds: milliseconds), "\(milliseconds)")
            var appended = Array("previous\t".utf8)
            RFC3339.append(milliseconds: milliseconds, to: &appended)
            #expect(appended == Array(("previous\t" + Self.oldTimestamp(milliseconds: milliseconds)).utf8))
        }
    }

    @Test("the fields written without the escape scan hold nothing it escapes: every environment, operation and push type, apns-ids")
    func plainFieldsNeedNoEscaping() {
        var values = APNs.Environment.allCases.map(\.rawValue) + APNs.Operation.allCases.map(\.rawValue)
        values += APNs.PushType.allCases.map(\.rawValue)
        values += (0..<1000).map { _ in APNsID.random().value } + ["7d3e5c2a-0f4b-4c8d-9e1a-2b3c4d5e6f70"]
        for value in values {
            var plain = CopyLineWriter(line: [])
            plain.plain(value)
            var scanned = CopyLineWriter(line: [])
            scanned.text(value)
            #expect(plain.finish() == scanned.finish(), "\(value)")
        }
        var plain = CopyLineWriter(line: [])
        plain.plain(nil)
        #expect(plain.finish() == Array("\\N\n".utf8))
    }

    @Test("a COPY text field escapes exactly what the five comparisons did, every byte value at every position, short and long fields")
    func escapeScanMatchesOld() {
        for byte in UInt8.min...UInt8.max {
            let old = byte == 0x5C || byte == 0x0A || byte == 0x0D || byte == 0x09 || byte == 0x00
            #expect([byte].withUnsafeBufferPointer { CopyLineWriter.needsEscaping($0) } == old, "\(byte)")
            // The byte at the end of a long clean field, and the field's line.
            let field = Array(repeating: UInt8(ascii: "a"), count: 300) + [byte]
            #expect(field.withUnsafeBufferPointer { CopyLineWriter.needsEscaping($0) } == old, "\(byte)")
        }
        // Every byte value at every position of fields 1 to 24 bytes long:
        // in a whole word, in the bytes past the last one, at either end.
        for length in 1...24 {
            for position in 0..<length {
                for byte in [UInt8(0x00), 0x09, 0x0A, 0x0D, 0x5C, 0x01, 0x08, 0x0B, 0x0C, 0x0E, 0x5B, 0x5D, 0x7F, 0x80, 0xDC, 0xFF] {
                    var field = Array(repeating: UInt8(ascii: "a"), count: length)
                    field[position] = byte
                    let old = byte == 0x5C || byte == 0x0A || byte == 0x0D || byte == 0x09 || byte == 0x00
                    #expect(field.withUnsafeBufferPointer { CopyLineWriter.needsEscaping($0) } == old, "\(length) \(position) \(byte)")
                }
            }
        }
        // Fields of random bytes against the comparisons, byte by byte.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let field = (0..<Int.random(in: 0...40, using: &generator)).map { _ in UInt8.random(in: 0x00...0xFF, using: &generator) | (Bool.random(using: &generator) ? 0x20 : 0) }
            let old = field.contains { $0 == 0x5C || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 || $0 == 0x00 }
            #expect(field.withUnsafeBufferPointer { CopyLineWriter.needsEscaping($0) } == old)
        }
        let texts = ["", "plain", "tab\there", "nl\nx\r\\y", "nul\u{0}here", "é日本\u{1}\u{7F}", String(repeating: "long reason é\t", count: 400)]
        for text in texts {
            var writer = CopyLineWriter(line: [])
            writer.text(text)
            writer.text(writing: { $0.append(contentsOf: text.utf8) })
            let expected = text.utf8.flatMap { byte -> [UInt8] in
                switch byte {
                case 0x5C: [0x5C, 0x5C]
                case 0x0A: Array(#"\n"#.utf8)
                case 0x0D: Array(#"\r"#.utf8)
                case 0x09: Array(#"\t"#.utf8)
                case 0x00: [0xEF, 0xBF, 0xBD]
                default: [byte]
                }
            }
            #expect(writer.finish() == expected + [0x09] + expected + [0x0A], "\(text)")
        }
    }
}
