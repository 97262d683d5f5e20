@testable import Audit
import APNs
import Foundation
import Testing

/// A finished send's row id is counted from a per-process random start
/// (``AuditRowID``), not drawn per row: it must keep ``APNsID/random()``'s
/// form and never repeat within a process.
@Suite("Audit row id")
struct AuditRowIDTests {
    /// Words drawn in order, for ``APNsID/random(using:)``.
    struct Words: RandomNumberGenerator {
        var words: [UInt64]
        mutating func next() -> UInt64 { words.removeFirst() }
    }

    @Test("an id's text is APNsID's version 4 form of its words")
    func idTextIsAPNsIDForm() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let high = generator.next() as UInt64, low = generator.next() as UInt64
            var bytes = Array("x".utf8)
            APNsID.append(high: high, low: low, to: &bytes)
            var words = Words(words: [high, low])
            #expect(bytes == Array(("x" + APNsID.random(using: &words).value).utf8))
            // Foundation's UUID text of the same 16 bytes, version and variant set, as an oracle.
            var raw = [UInt8](repeating: 0, count: 16)
            withUnsafeBytes(of: high.littleEndian) { raw.replaceSubrange(0..<8, with: $0) }
            withUnsafeBytes(of: low.littleEndian) { raw.replaceSubrange(8..<16, with: $0) }
            raw[6] = (raw[6] & 0x0F) | 0x40
            raw[8] = (raw[8] & 0x3F) | 0x80
            let uuid = UUID(uuid: (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7], raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
            #expect(bytes == Array(("x" + uuid.uuidString.lowercased()).utf8))
        }
        for _ in 0..<2000 {
            var bytes: [UInt8] = []
            AuditRowID.appendNext(to: &bytes)
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(APNsID(text)?.value == text)
            #expect(Array(text.utf8)[14] == UInt8(ascii: "4"))
            #expect("89ab".utf8.contains(Array(text.utf8)[19]))
        }
    }

    @Test("ids never repeat: 200,000 from two threads at once, including numbers 64 and 256 apart")
    func idsAreUnique() async {
        async let first = Self.draw(100_000)
        async let second = Self.draw(100_000)
        let all = await first + second
        #expect(all.count == 200_000)
        #expect(Set(all).count == all.count)
    }

    static func draw(_ count: Int) async -> [String] {
        (0..<count).map { _ in
            var bytes: [UInt8] = []
            AuditRowID.appendNext(to: &bytes)
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    @Test("the count moves the id past the byte the variant overwrites")
    func countAboveTheVariant() {
        let first = AuditRowID.nextWords()
        let second = AuditRowID.nextWords()
        #expect(first.high == second.high)
        // One row later: 256 more in the low word (with any rows other tests took meanwhile, a multiple of 256).
        #expect((second.low &- first.low) % 256 == 0)
        #expect(second.low != first.low)
    }
}
