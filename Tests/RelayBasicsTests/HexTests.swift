import RelayBasics
import Testing

@Suite("Hex")
struct HexTests {
    @Test("encode is lowercase, two digits per byte, zeros kept")
    func encode() {
        #expect(Hex.encode([]) == "")
        #expect(Hex.encode([0x00, 0x01, 0x0F, 0x10, 0xAB, 0xFF]) == "00010f10abff")
        #expect(Hex.encode(0...255).count == 512)
    }

    @Test("decode then encode gives every byte back; either case decodes")
    func roundTrip() {
        let all = Array(UInt8.min...UInt8.max)
        #expect(Hex.decode(Hex.encode(all)) == all)
        #expect(Hex.decode(Hex.encode(all).uppercased()) == all)
        #expect(Hex.decode("aBcD") == [0xAB, 0xCD])
        #expect(Hex.decode("") == [])
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let bytes = (0..<Int.random(in: 0...64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(Hex.decode(Hex.encode(bytes)) == bytes)
        }
    }

    @Test("decode refuses odd lengths and anything but ASCII hex digits", arguments: [
        "a", "abc", "0g", "zz", " 0a", "0a ", "0x0a", "-1", "０a", "ａb", "é0", "0\u{0}",
    ])
    func decodeRefuses(text: String) {
        #expect(Hex.decode(text) == nil)
    }

    @Test("single digits: values, and what counts as a digit")
    func digits() {
        for (offset, byte) in Array("0123456789".utf8).enumerated() { #expect(Hex.value(of: byte) == UInt8(offset)) }
        for (offset, byte) in Array("abcdef".utf8).enumerated() { #expect(Hex.value(of: byte) == UInt8(10 + offset)) }
        for (offset, byte) in Array("ABCDEF".utf8).enumerated() { #expect(Hex.value(of: byte) == UInt8(10 + offset)) }
        let digits = Set("0123456789abcdefABCDEF".utf8)
        for byte in UInt8.min...UInt8.max { #expect(Hex.isDigit(byte) == digits.contains(byte), "\(byte)") }
    }

    @Test("isLowercase accepts only 0-9 and a-f")
    func lowercase() {
        #expect(Hex.isLowercase("0123456789abcdef"))
        #expect(Hex.isLowercase(""))
        #expect(!Hex.isLowercase("ABCDEF"))
        #expect(!Hex.isLowercase("00f067aa0ba902bG"))
        #expect(!Hex.isLowercase("０"))
    }
}
