/// An integer's decimal digits written straight into a byte buffer, as
/// `"\(value)"` prints them, without building that string: the journal
/// key's start (``AuditJournalKey``) and a COPY line's integers
/// (``CopyLineWriter/integer(_:)``), several per send on the sending thread.
enum DecimalDigits {
    /// `value`'s digits: from the last, each by a constant division (a
    /// multiplication), into a buffer on the stack.
    static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var rest = value
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    /// `value`'s digits after a `-` when it is negative (`Int.min` too: its
    /// magnitude fits a `UInt64`).
    static func append(_ value: Int, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        append(UInt64(value.magnitude), to: &bytes)
    }
}
