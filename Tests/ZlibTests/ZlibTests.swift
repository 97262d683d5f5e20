import Testing
@testable import Zlib

@Suite("Zlib: the one fenced file of zlib calls")
struct ZlibTests {
    @Test("gzip output is what zlib's inflate reads back")
    func gzipRoundTrip() throws {
        let input = Array(String(repeating: "apns_relay_sends_total{app=\"x\"} 1\n", count: 300).utf8)
        let compressed = try #require(Zlib.gzip(input))
        #expect(compressed.count < input.count / 5)
        #expect(compressed.prefix(2) == [0x1F, 0x8B])
        #expect(Zlib.gunzip(compressed) == input)
        #expect(Zlib.gunzip(Array(compressed.dropLast(10))) == nil)
    }

    @Test("CRC-32 is the standard one: the check value of \"123456789\" and of nothing")
    func crc32CheckValues() {
        #expect(Zlib.crc32(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(Zlib.crc32([UInt8]()) == 0)
        // A slice and a non-contiguous collection give the same value as the array.
        let bytes = Array("xx123456789".utf8)
        #expect(Zlib.crc32(bytes[2...]) == 0xCBF4_3926)
        #expect(Zlib.crc32("123456789".utf8) == 0xCBF4_3926)
    }

    @Test("CRC-32 is zlib's value for every length to 4 KiB, every alignment, zeros, ones and random bytes")
    func crc32MatchesZlib() {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<(4096 + 16)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for bytes in [random, [UInt8](repeating: 0, count: 4096 + 16), [UInt8](repeating: 0xFF, count: 4096 + 16)] {
            bytes.withUnsafeBufferPointer { all in
                for offset in [0, 1, 7, 8, 15] {
                    for length in 0...4096 {
                        let buffer = UnsafeBufferPointer(rebasing: all[offset..<(offset + length)])
                        let expected = Zlib.zlibCRC32(buffer)
                        if Zlib.crc32(buffer) != expected {
                            Issue.record("length \(length), offset \(offset): \(Zlib.crc32(buffer)) != zlib's \(expected)")
                            return
                        }
                    }
                }
            }
        }
        // A record's size on the journal's path: an intent's and a completion's.
        let line = Array(String(repeating: "7d3e5c2a-0f4b\t", count: 40).utf8)
        #expect(Zlib.crc32(line) == line.withUnsafeBufferPointer { Zlib.zlibCRC32($0) })
    }

    @Test("the version is zlib's, not a placeholder")
    func version() {
        #expect(Zlib.version.first?.isNumber == true, "\(Zlib.version)")
    }
}
