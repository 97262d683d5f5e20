import RelayBasics
@testable import Telemetry
import Testing
import TestSupport

/// The OTLP encoder's ids: eight hex digits at a time by bit arithmetic,
/// held to a byte-by-byte table decode.
@Suite("OTLP span ids: the word-at-a-time hex decode against a byte at a time")
struct SpanIDEncodingTests {
    static let lowercaseDigits = Array("0123456789abcdef".utf8)

    /// What the eight digits spell, one byte at a time; nil unless every one is 0-9 or a-f.
    static func reference(_ digits: [UInt8]) -> UInt64? {
        guard digits.allSatisfy({ lowercaseDigits.contains($0) }) else { return nil }
        var word: UInt64 = 0
        for pair in 0..<4 {
            let text = String(decoding: digits[(2 * pair)..<(2 * pair + 2)], as: UTF8.self)
            word |= UInt64(Hex.decode(text)![0]) << (8 * UInt64(pair))
        }
        return word
    }

    static func word(_ digits: [UInt8]) -> UInt64 {
        digits.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
    }

    @Test("every byte value in every one of the eight places, the others valid digits: decoded as the table decodes it, refused unless 0-9 or a-f")
    func everyByteEveryPlace() {
        var refused = 0
        for place in 0..<8 {
            for byte in 0...255 {
                var digits = Array("3f9a07c1".utf8)
                digits[place] = UInt8(byte)
                let fast = Protobuf.lowercaseHexBytes(Self.word(digits))
                #expect(fast == Self.reference(digits), "byte \(byte) at \(place)")
                if fast == nil { refused += 1 }
            }
        }
        #expect(refused == 8 * (256 - 16))
    }

    @Test("20,000 random words from digits, upper case, g to z and other bytes: the same as the table")
    func randomWords() {
        var generator = SplitMix(state: 26)
        let alphabet = Array("0123456789abcdefABCDEFghijklmnopqrstuvwxyz/:@`{~ \u{7f}".utf8) + [0x00, 0x80, 0xB0, 0xE6, 0xFF]
        var accepted = 0
        for round in 0..<20_000 {
            // Half the words all valid, so that both answers are seen often.
            let pool = round % 2 == 0 ? Self.lowercaseDigits : alphabet
            let digits = (0..<8).map { _ in pool[Int(generator.next() % UInt64(pool.count))] }
            let fast = Protobuf.lowercaseHexBytes(Self.word(digits))
            #expect(fast == Self.reference(digits), "\(digits)")
            if fast != nil { accepted += 1 }
        }
        #expect(accepted >= 10_000)
    }

    @Test("putIDs writes trace, span and parent ids (16, 8 and 8 bytes; other even lengths too) as Hex.decode gives them; refuses what is not lowercase hex, and leaves count as it was")
    func putIDs() {
        var generator = SplitMix(state: 2600)
        func randomHex(_ count: Int) -> String {
            String(decoding: (0..<count).map { _ in Self.lowercaseDigits[Int(generator.next() % 16)] }, as: UTF8.self)
        }
        for round in 0..<2_000 {
            let trace = randomHex(32), span = randomHex(16)
            // Parents absent, of the usual length, and of lengths the word loop and the pair loop share.
            let parent: String? = [nil, randomHex(16), randomHex(2 * (round % 32 + 1))][round % 3]
            var expected: [UInt8] = [1 << 3 | 2, 16] + Hex.decode(trace)! + [2 << 3 | 2, 8] + Hex.decode(span)!
            if let parent { expected += [4 << 3 | 2, UInt8(parent.utf8.count / 2)] + Hex.decode(parent)! }
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 128) { buffer in
                var count = 3
                #expect(Protobuf.putIDs(traceID: trace, spanID: span, parentSpanID: parent, buffer.baseAddress!, &count))
                #expect(Array(buffer[3..<count]) == expected)
            }
        }
        // A refused id anywhere, in either loop: false, and count untouched.
        for (trace, span, parent) in [
            ("4BF92F3577B34DA6A3CE929D0E0E4736", "00f067aa0ba902b7", nil),
            ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902bg", nil),
            ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "0g"),
            ("4bf92f3577b34da6a3ce929d0e0e473", "00f067aa0ba902b7", nil),
            ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "00f067aa0ba902b7aa" + "x"),
            // A good 16-digit block written, then a bad last pair: count still restored.
            ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "00f067aa0ba902b7ag"),
        ] as [(String, String, String?)] {
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 128) { buffer in
                var count = 5
                #expect(!Protobuf.putIDs(traceID: trace, spanID: span, parentSpanID: parent, buffer.baseAddress!, &count))
                #expect(count == 5)
            }
        }
    }
}
