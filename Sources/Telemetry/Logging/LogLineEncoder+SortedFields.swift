public import Logging
public import Relay
import RelayBasics

/// A line from fields already sorted by key (``SortedFieldsLogging``): a
/// send's `send finished` line, with no metadata dictionary built for it.
extension LogLineEncoder {
    /// The line ``encode(timestampNanoseconds:level:label:message:handler:provided:event:into:)``
    /// writes with `fields` as the event's metadata (each a `.string`): the
    /// same bytes, without a dictionary for the fields and without sorting
    /// them. Mostly the handler's and the provider's metadata add no key
    /// (none, or ids the fields override): then the line is written in one
    /// allocation sized up front, every piece copied in place
    /// (``fieldsOnlyLine(timestampNanoseconds:level:label:message:fields:)``).
    /// When they do, the dictionary path merges them, as for any line.
    public static func line(
        timestampNanoseconds: UInt64, level: Logger.Level, label: String, message: String,
        handler: Logger.Metadata, provided: Logger.Metadata?, sortedFields fields: UnsafeBufferPointer<LogField>
    ) -> [UInt8] {
        assert(isSorted(fields), "log fields must be unique and sorted by key, need no escape, and not be the line's own")
        guard addsKeys(provided ?? [:], to: fields) || addsKeys(handler, to: fields) else {
            return fieldsOnlyLine(timestampNanoseconds: timestampNanoseconds, level: level, label: label, message: message, fields: fields)
        }
        var output: [UInt8] = []
        output.reserveCapacity(512)
        encode(
            timestampNanoseconds: timestampNanoseconds, level: level, label: label, message: message, handler: handler,
            provided: provided, event: Logger.Metadata(fields), into: &output)
        return output
    }

    /// Whether `metadata` has a key the line shows that `fields` do not hold.
    private static func addsKeys(_ metadata: Logger.Metadata, to fields: UnsafeBufferPointer<LogField>) -> Bool {
        metadata.keys.contains { !reserved($0) && !contains(fields, $0) }
    }

    /// The line of `fields` alone, written into one array sized for the
    /// worst case (every byte of a string escaped as `\u00XX`), the pieces
    /// copied in place: a growing array checked its capacity and
    /// uniqueness on each of the line's fifty-odd appends.
    static func fieldsOnlyLine(
        timestampNanoseconds: UInt64, level: Logger.Level, label: String, message: String,
        fields: UnsafeBufferPointer<LogField>
    ) -> [UInt8] {
        @inline(__always) func escapedBound(_ text: String) -> Int { 2 + 6 * text.utf8.count }
        var bound = #"{"ts":""#.utf8.count + 24 + #"","level":"#.utf8.count + escapedBound(level.rawValue)
            + #","logger":"#.utf8.count + escapedBound(label) + #","msg":"#.utf8.count + escapedBound(message) + 2
        for field in fields { bound += 4 + field.key.utf8CodeUnitCount + escapedBound(field.value) }
        return [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
            var out = RawLine(at: buffer.baseAddress!)
            out.put(#"{"ts":""#)
            RFC3339.write(nanoseconds: timestampNanoseconds, to: out.cursor)
            out.cursor += 24
            out.put(#"","level":"#)
            out.putString(level.rawValue)
            out.put(#","logger":"#)
            out.putString(label)
            out.put(#","msg":"#)
            out.putString(message)
            for field in fields {
                out.put(#",""#)
                out.put(field.keyBytes)
                out.put(#"":"#)
                out.putString(field.value)
            }
            out.put("}\n")
            count = out.cursor - buffer.baseAddress!
            precondition(count <= bound, "a log line past its bound")
        }
    }

    /// Whether one of `fields` has the key `key`.
    static func contains(_ fields: UnsafeBufferPointer<LogField>, _ key: String) -> Bool {
        withBytes(key) { key in
            fields.contains { field in
                let bytes = field.keyBytes
                return bytes.count == key.count && bytes.elementsEqual(key)
            }
        }
    }

    /// Unique keys in UTF-8 order, each needing no JSON escape and none of the line's own.
    static func isSorted(_ fields: UnsafeBufferPointer<LogField>) -> Bool {
        for (index, field) in fields.enumerated() {
            let key = field.keyBytes
            guard key.allSatisfy(plain), !reserved(field.key.description) else { return false }
            if index > 0, !bytesPrecede(fields[index - 1].keyBytes, key) { return false }
        }
        return true
    }

    /// `a` before `b` in byte order (a prefix first).
    static func bytesPrecede(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        let common = min(a.count, b.count)
        var index = 0
        while index < common {
            if a[index] != b[index] { return a[index] < b[index] }
            index += 1
        }
        return a.count < b.count
    }

    /// The string's UTF-8 bytes in place (a copy only for a string without contiguous storage).
    static func withBytes<Result>(_ string: String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        if let result = string.utf8.withContiguousStorageIfAvailable(body) { return result }
        return Array(string.utf8).withUnsafeBufferPointer(body)
    }
}

/// A cursor into memory sized for the whole line: each piece copied at
/// the cursor, JSON strings escaped as ``LogLineEncoder/appendString(_:to:)`` escapes them.
private struct RawLine {
    var cursor: UnsafeMutablePointer<UInt8>

    init(at start: UnsafeMutablePointer<UInt8>) { cursor = start }

    @inline(__always)
    mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let base = bytes.baseAddress else { return }
        cursor.update(from: base, count: bytes.count)
        cursor += bytes.count
    }

    @inline(__always)
    mutating func put(_ text: StaticString) {
        put(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @inline(__always)
    mutating func put(byte: UInt8) {
        cursor.pointee = byte
        cursor += 1
    }

    /// A JSON string: the bytes copied whole unless one needs escaping.
    mutating func putString(_ string: String) {
        put(byte: UInt8(ascii: "\""))
        LogLineEncoder.withBytes(string) { bytes in
            if bytes.allSatisfy(LogLineEncoder.plain) {
                put(bytes)
                return
            }
            var escaped: [UInt8] = []
            for byte in bytes { LogLineEncoder.appendByte(byte, to: &escaped) }
            escaped.withUnsafeBufferPointer { put($0) }
        }
        put(byte: UInt8(ascii: "\""))
    }
}
