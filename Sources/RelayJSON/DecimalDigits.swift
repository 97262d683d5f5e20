/// An integer's decimal digits written straight into a byte buffer, as
/// `"\(value)"` prints them, without building that string: a JSON number's
/// integral value (``JSONValue/appendNumber(_:to:)``), and the audit's
/// journal key start and COPY line integers, several per send on the
/// sending thread (inlinable for them: a call across modules otherwise).
public enum DecimalDigits {
    /// `value`'s digits: from the last, each by a constant division (a
    /// multiplication), into a buffer on the stack.
    @inlinable
    public static func append(_ value: UInt64, to bytes: inout [UInt8]) {
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
    @inlinable
    public static func append(_ value: Int, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        append(UInt64(value.magnitude), to: &bytes)
    }
}
