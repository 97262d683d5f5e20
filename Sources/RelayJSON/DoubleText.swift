/// A `Double`'s text appended straight to a byte buffer, with no `String`
/// in between: the audit row's `latency_ms` and its attempt log's
/// `duration_ms`, on every send's sending thread.
public enum DoubleText {
    /// Appends `value.description` (Swift's shortest text that reads back
    /// as the same value: `5.0`, `12.345`, `1e-05`): the digits come from
    /// the same formatter `description` uses, through `Double.write(to:)`,
    /// which hands its stack buffer to ``ByteSink/_writeASCII(_:)``. Building
    /// the `String` first (a heap allocation past 15 bytes) and copying it
    /// out cost more than the formatting.
    public static func append(_ value: Double, to bytes: inout [UInt8]) {
        var sink = ByteSink(bytes: bytes)
        bytes = []
        value.write(to: &sink)
        bytes = sink.bytes
    }

    /// The bytes a `TextOutputStreamable` writes, appended to an array the
    /// sink holds (moved in and out, so no copy of it is made).
    struct ByteSink: TextOutputStream {
        var bytes: [UInt8]

        mutating func write(_ string: String) { bytes.append(contentsOf: string.utf8) }

        /// What the standard library's number types call with their
        /// formatted ASCII; the protocol's default builds a `String` from it.
        mutating func _writeASCII(_ buffer: UnsafeBufferPointer<UInt8>) { bytes.append(contentsOf: buffer) }
    }
}

extension JSONValue {
    /// Appends ``numberText(_:)``'s bytes: an integral value of magnitude
    /// below 1e15 as its integer digits, any other as ``DoubleText``.
    public static func appendNumber(_ value: Double, to output: inout [UInt8]) {
        precondition(value.isFinite, "JSON cannot encode \(value)")
        guard value.rounded(.towardZero) == value, abs(value) < 1e15 else {
            return DoubleText.append(value, to: &output)
        }
        DecimalDigits.append(Int(value), to: &output)
    }
}
