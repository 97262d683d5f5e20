@testable import Audit
import Testing

/// The one decimal writer behind the journal key's start and a COPY line's
/// integers: the digits Swift prints, at the edges of each type.
@Suite("Audit: decimal digits")
struct DecimalDigitsTests {
    static let unsigned: [UInt64] = [0, 1, 9, 10, 11, 99, 100, 101, 999_999_999, 1_000_000_000, 1_763_800_000_000_000_000, UInt64(Int64.max), UInt64.max - 1, UInt64.max]
    static let signed: [Int] = [0, 1, -1, 9, -9, 10, -10, 99, -100, Int.max, Int.max - 1, Int.min + 1, Int.min]

    @Test("an unsigned value: its digits as Swift prints them, appended after what the buffer held")
    func unsignedDigits() {
        for value in Self.unsigned {
            var bytes = Array("x".utf8)
            DecimalDigits.append(value, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == "x\(value)")
        }
    }

    @Test("a signed value: a minus sign when negative, Int.min and Int.max included")
    func signedDigits() {
        for value in Self.signed {
            var bytes = Array("x".utf8)
            DecimalDigits.append(value, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == "x\(value)")
        }
    }

    @Test("a COPY line's integer field: the same digits, NULL as \\N")
    func copyIntegers() {
        var writer = CopyLineWriter(line: [])
        for value in Self.signed { writer.integer(value) }
        writer.integer(nil)
        #expect(String(decoding: writer.finish(), as: UTF8.self) == Self.signed.map { "\($0)" }.joined(separator: "\t") + "\t\\N\n")
    }

    @Test("a journal key's start: the same digits after the apns-id and a slash")
    func journalKeyStart() {
        for value in Self.unsigned {
            #expect(AuditJournalKey(apnsID: "id", startedAt: value).text == "id/\(value)")
        }
    }
}
