@testable import Audit
import RelayJSON
import Testing

/// The one decimal writer behind JSON integers, the audit journal key's start and a COPY line's
/// integers: the digits Swift prints, at the edges of each type.
@Suite("Audit: decimal digits (RelayJSON's, in the audit's lines)")
struct DecimalDigitsTests {
    static let unsigned: [UInt64] = [0, 1, 9, 10, 11, 99, 100, 101, 999_999_999, 1_000_000_000, 1_763_800_000_000_000_000, UInt64(Int64.max), UInt64.max - 1, UInt64.max]
    static let signed: [Int] = [0, 1, -1, 9, -9, 10, -10, 99, -100, Int.max, Int.max - 1, Int.min + 1, Int.min]

    /// What `write` leaves after an `x` already in the buffer.
    static func appended(_ write: (inout [UInt8]) -> Void) -> String {
        var bytes = Array("x".utf8)
        write(&bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test("a value's digits as Swift prints them, appended after what the buffer held: a minus sign when negative, Int.min, Int.max and UInt64.max included")
    func digits() {
        for value in Self.unsigned {
            #expect(Self.appended { DecimalDigits.append(value, to: &$0) } == "x\(value)")
        }
        for value in Self.signed {
            #expect(Self.appended { DecimalDigits.append(value, to: &$0) } == "x\(value)")
        }
    }

    @Test("counted first, then written at a pointer: the same digits, exactly as many as counted")
    func countedDigits() {
        for value in Self.unsigned {
            let count = DecimalDigits.count(value)
            #expect(count == "\(value)".utf8.count)
            // A byte either side, to see the write stays inside its count.
            var buffer = [UInt8](repeating: UInt8(ascii: "#"), count: count + 2)
            buffer.withUnsafeMutableBufferPointer { DecimalDigits.write(value, count: count, to: $0.baseAddress! + 1) }
            #expect(String(decoding: buffer, as: UTF8.self) == "#\(value)#")
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
