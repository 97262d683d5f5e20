extension StringProtocol {
    /// Whether every UTF-8 byte passes `test` (true for empty text), scanned
    /// as a buffer: native strings are contiguous, and the UTF8View's
    /// iterator costs more than most checks. For checks on hot paths (a
    /// header name already lowercase, a token of hex digits).
    @inlinable
    public func allUTF8Bytes(satisfy test: (UInt8) -> Bool) -> Bool {
        utf8.withContiguousStorageIfAvailable { $0.allSatisfy(test) } ?? utf8.allSatisfy(test)
    }
}
