import RelayBasics

/// A span's ids as bytes fields, written into memory the caller sized.
extension Protobuf {
    /// The trace, span and parent span ids (fields 1, 2 and 4) as bytes
    /// fields at `bytes + count` (102 bytes at most); false (`count` as it
    /// was) when one is not an even number of hex digits, 64 at most, in
    /// contiguous UTF-8 (never so for the relay's own ids):
    /// ``hexBytes(field:_:into:)`` then writes them.
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

    /// Each byte's value as a hex digit, 0xFF for a byte that is not one.
    static let hexValues: [UInt8] = (0...255).map { byte in Hex.value(of: UInt8(byte)) ?? 0xFF }
}
