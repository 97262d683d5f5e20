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

    /// How many digits ``append(_:to:)-(UInt64,_)`` writes for `value`: for
    /// a writer that sizes its buffer first (``write(_:count:to:)``).
    @inlinable
    public static func count(_ value: UInt64) -> Int {
        var count = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            count += 1
        }
        return count
    }

    /// Writes `value`'s `count` (``count(_:)``) digits at `start`.
    @inlinable
    public static func write(_ value: UInt64, count: Int, to start: UnsafeMutablePointer<UInt8>) {
        var rest = value
        var index = count
        repeat {
            index -= 1
            start[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        } while index > 0
    }

    /// `value`'s digits after a `-` when it is negative (`Int.min` too: its
    /// magnitude fits a `UInt64`).
    @inlinable
    public static func append(_ value: Int, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        append(UInt64(value.magnitude), to: &bytes)
    }
}
