import Testing
import Zlib

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

    @Test("the version is zlib's, not a placeholder")
    func version() {
        #expect(Zlib.version.first?.isNumber == true, "\(Zlib.version)")
    }
}
