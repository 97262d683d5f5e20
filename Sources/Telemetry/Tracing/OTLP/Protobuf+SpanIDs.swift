import RelayBasics

/// A span's ids as bytes fields, written into memory the caller sized.
extension Protobuf {
    /// The trace, span and parent span ids (fields 1, 2 and 4) as bytes
    /// fields at `bytes + count` (102 bytes at most); false (`count` as it
    /// was) when one is not an even number of hex digits, 64 at most, in
    /// contiguous UTF-8, or has a digit outside `0`-`9` and `a`-`f` in one
    /// of its 16-digit blocks (upper case there too; a last pair under 16
    /// digits may be upper case). Never so for the relay's own ids, which
    /// are lowercase; for the others the caller writes the ids with
    /// ``hexBytes(field:_:into:)``, which takes either case.
    static func putIDs(
        traceID: String, spanID: String, parentSpanID: String?, _ bytes: UnsafeMutablePointer<UInt8>, _ count: inout Int
    ) -> Bool {
        // Read once: a global's every read checks its lazy initialization.
        let values = hexValues
        return values.withUnsafeBufferPointer { values -> Bool in
            let start = count
            guard putHexID(field: 1, traceID, values, bytes, &count),
                  putHexID(field: 2, spanID, values, bytes, &count),
                  parentSpanID.map({ putHexID(field: 4, $0, values, bytes, &count) }) ?? true
            else {
                count = start
                return false
            }
            return true
        }
    }

    /// One id's tag, length and bytes at `bytes + count` (34 bytes at most).
    private static func putHexID(
        field: UInt8, _ hex: String, _ values: UnsafeBufferPointer<UInt8>, _ bytes: UnsafeMutablePointer<UInt8>,
        _ count: inout Int
    ) -> Bool {
        let start = count
        let written = hex.utf8.withContiguousStorageIfAvailable { digits -> Bool in
            guard digits.count % 2 == 0, digits.count <= 64 else { return false }
            bytes[count] = field << 3 | 2
            bytes[count + 1] = UInt8(digits.count / 2)
            count += 2
            var index = 0
            // Sixteen digits at a time (every id the relay makes is 16 or 32),
            // the rest one pair at a time.
            while index + 16 <= digits.count {
                let raw = UnsafeRawPointer(digits.baseAddress! + index)
                guard let high = lowercaseHexBytes(UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self))),
                      let low = lowercaseHexBytes(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
                else { return false }
                UnsafeMutableRawPointer(bytes + count).storeBytes(of: (high | low << 32).littleEndian, as: UInt64.self)
                count += 8
                index += 16
            }
            while index < digits.count {
                let high = values[Int(digits[index])], low = values[Int(digits[index + 1])]
                guard high < 16, low < 16 else { return false }
                bytes[count] = high << 4 | low
                count += 1
                index += 2
            }
            return true
        }
        if written == true { return true }
        count = start
        return false
    }

    /// Eight hex digits (as loaded from memory: the first in the low byte)
    /// as the four bytes they spell, in the low 32 bits in memory order; nil
    /// unless every one is `0`-`9` or `a`-`f` (the caller then falls back to
    /// ``hexBytes(field:_:into:)``).
    ///
    /// A digit's value is its low nibble, plus 9 for a letter (bit 6 set).
    /// A value past 15 (`g` to `o`, and others) is refused; the others are
    /// written back out as lowercase hex and compared with the input: only
    /// a valid digit survives the round trip. ~40 instructions for what the
    /// table took ~300 for, three ids a span.
    @inline(__always)
    static func lowercaseHexBytes(_ digits: UInt64) -> UInt64? {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let values = (digits & (ones &* 0x0F)) &+ ((digits >> 6) & ones) &* 9
        // At most 15 + 9 = 24 a lane: no lane carries into the next, and bit 4 marks 16 and up.
        guard values & (ones &* 0x10) == 0 else { return nil }
        // Back to text: value + '0', + 39 more for 10 and up ('a' - '9' - 1).
        let letters = ((values &+ ones &* 6) >> 4) & ones
        guard values &+ ones &* 0x30 &+ letters &* 39 == digits else { return nil }
        // Each pair into one byte (in the pair's first lane), then the four lanes together.
        var packed = ((values << 4) | (values >> 8)) & 0x00FF_00FF_00FF_00FF
        packed = (packed | packed >> 8) & 0x0000_FFFF_0000_FFFF
        return (packed | packed >> 16) & 0xFFFF_FFFF
    }

    /// Each byte's value as a hex digit, 0xFF for a byte that is not one.
    static let hexValues: [UInt8] = (0...255).map { byte in Hex.value(of: UInt8(byte)) ?? 0xFF }
}
