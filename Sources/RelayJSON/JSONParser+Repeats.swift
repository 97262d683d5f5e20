// Reuse of a large object parsed just before at the same depth (a batch repeating one snapshot).
extension JSONParser {
    /// The value of the object starting at `index` when its text is, byte
    /// for byte, that of the last large object parsed at the same depth (a
    /// batch's items repeating one snapshot): that object's value, shared,
    /// with `index` past it; nil otherwise. An object's text ends at its
    /// closing brace, so the same bytes parse to the same value, and at the
    /// same depth under the same limit: they were valid there, they are here.
    /// Comparing bytes is cheaper than parsing them again, and the value's
    /// storage is shared, so comparing the two values later finds them equal at once.
    mutating func repeatedObject(depth: Int) -> JSONValue? {
        guard depth < lastObjects.count, let last = lastObjects[depth] else { return nil }
        let length = last.end - last.start
        guard bytes.count - index >= length else { return nil }
        let same = bytes.withUnsafeBytes { buffer in
            Self.equalBytes(buffer.baseAddress! + index, buffer.baseAddress! + last.start, count: length)
        }
        guard same else { return nil }
        index += length
        return last.value
    }

    /// Remembers an object just parsed from `start` to `index` for ``repeatedObject(depth:)``.
    mutating func remember(_ value: JSONValue, from start: Int, depth: Int) {
        guard index - start >= Self.repeatMinimumBytes, depth < Self.repeatDepths else { return }
        if lastObjects.isEmpty { lastObjects = Array(repeating: nil, count: Self.repeatDepths) }
        lastObjects[depth] = (start, index, value)
    }

    /// Whether `count` bytes at `a` and `b` are equal: eight at a time, then the rest.
    static func equalBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, count: Int) -> Bool {
        var offset = 0
        while count - offset >= 8 {
            guard a.loadUnaligned(fromByteOffset: offset, as: UInt64.self) == b.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            else { return false }
            offset += 8
        }
        while offset < count {
            guard a.load(fromByteOffset: offset, as: UInt8.self) == b.load(fromByteOffset: offset, as: UInt8.self) else { return false }
            offset += 1
        }
        return true
    }
}
