import RelayBasics
import RelayJSON

/// PostgreSQL COPY text format.
enum CopyText {
    /// Field `index` (from 0) of a COPY line, as COPY text (escapes kept), without the line's newline.
    static func field(_ index: Int, of line: [UInt8]) -> String? {
        let fields = line.split(separator: 0x09, maxSplits: index + 1, omittingEmptySubsequences: false)
        guard index < fields.count else { return nil }
        let field = fields[index]
        return String(decoding: field.last == 0x0A ? field.dropLast() : field, as: UTF8.self)
    }

    static func timestamp(_ nanoseconds: UInt64) -> String {
        RFC3339.format(nanoseconds: nanoseconds)
    }

    /// A text[] literal: every element double-quoted, `"` and `\` escaped.
    static func array(_ values: [String]) -> String {
        "{" + values.map { value in
            "\"" + value.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\""
        }.joined(separator: ",") + "}"
    }
}

/// Builds one COPY text line: fields separated by tabs, `\N` for NULL,
/// backslash, newline, carriage return and tab escaped.
///
/// A NUL character cannot be stored in a Postgres `text` value at all (COPY
/// refuses the whole batch with "invalid byte sequence for encoding UTF8:
/// 0x00"), so it is written as U+FFFD, the Unicode replacement character:
/// the row lands, and the replacement shows where the input was odd.
struct CopyLineWriter {
    private var line: [UInt8]
    private var first = true

    init(line: [UInt8]) { self.line = line }

    /// `\N`, COPY's NULL.
    private mutating func null() {
        line.append(contentsOf: [0x5C, UInt8(ascii: "N")])
    }

    private mutating func separate() {
        if first { first = false } else { line.append(0x09) }
    }

    mutating func text(_ value: String?) {
        separate()
        guard let value else {
            return null()
        }
        // The bytes in place, without the copy of the string (a retain and a
        // release per field) that `withUTF8`, a mutating method, needs; a
        // string without contiguous UTF-8 (bridged) is copied.
        let appended: Void? = value.utf8.withContiguousStorageIfAvailable { append(escaping: $0) }
        if appended == nil {
            var contiguous = value
            contiguous.withUTF8 { append(escaping: $0) }
        }
    }

    /// A text field whose value cannot hold a byte COPY escapes (an enum's
    /// raw value, a parsed apns-id): appended without the scan, with the
    /// bytes ``text(_:)`` would write for it (a test holds every such value
    /// to that; debug builds check each).
    mutating func plain(_ value: String?) {
        separate()
        guard let value else {
            return null()
        }
        let appended: Void? = value.utf8.withContiguousStorageIfAvailable { bytes in
            assert(!Self.needsEscaping(bytes), "a plain COPY field holds a byte COPY escapes")
            line.append(contentsOf: bytes)
        }
        if appended == nil { line.append(contentsOf: value.utf8) }
    }

    /// Whether any byte of `bytes` is one COPY text escapes (or replaces).
    ///
    /// Eight bytes at a time: a word holds a byte equal to `b` exactly when
    /// `word ^ (b * 0x01…01)` holds a zero byte, and `(x - 0x01…01) & ~x &
    /// 0x80…80` is nonzero exactly when `x` holds one; the bytes past the
    /// last whole word by the five comparisons. (A 64-bit mask tested per
    /// byte measured 1,700 instructions a send more than the comparisons;
    /// this is a test per word, issue 26.)
    @inline(__always)
    static func needsEscaping(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        let count = bytes.count
        var offset = 0
        if count >= 8 {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            let raw = UnsafeRawPointer(base)
            while offset + 8 <= count {
                let word = raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                let tab = word ^ (0x09 &* ones), newline = word ^ (0x0A &* ones)
                let carriageReturn = word ^ (0x0D &* ones), backslash = word ^ (0x5C &* ones)
                let found = ((word &- ones) & ~word) | ((tab &- ones) & ~tab) | ((newline &- ones) & ~newline)
                    | ((carriageReturn &- ones) & ~carriageReturn) | ((backslash &- ones) & ~backslash)
                if found & highs != 0 { return true }
                offset += 8
            }
        }
        while offset < count {
            let byte = base[offset]
            if byte == 0x5C || byte == 0x0A || byte == 0x0D || byte == 0x09 || byte == 0x00 { return true }
            offset += 1
        }
        return false
    }

    private mutating func append(escaping bytes: UnsafeBufferPointer<UInt8>) {
        // Most fields need no escaping: copy them whole.
        if !Self.needsEscaping(bytes) {
            line.append(contentsOf: bytes)
            return
        }
        for byte in bytes {
            switch byte {
            case 0x5C: line.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: line.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: line.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: line.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0x00: line.append(contentsOf: [0xEF, 0xBF, 0xBD])  // U+FFFD
            default: line.append(byte)
            }
        }
    }

    /// A text field that `body` appends to the line's bytes (JSON, an id):
    /// escaped as ``text(_:)`` escapes, in place, so the value needs no
    /// string or buffer of its own. Most such fields need no escaping.
    mutating func text(writing body: (inout [UInt8]) -> Void) {
        separate()
        let start = line.count
        body(&line)
        let needsEscaping = line.withUnsafeBufferPointer { Self.needsEscaping(UnsafeBufferPointer(rebasing: $0[start...])) }
        guard needsEscaping else { return }
        let raw = Array(line[start...])
        line.removeSubrange(start...)
        raw.withUnsafeBufferPointer { append(escaping: $0) }
    }

    /// A field that `body` appends and that holds nothing COPY escapes (hex,
    /// digits, dashes: a row id), not scanned for escapes.
    mutating func unescaped(writing body: (inout [UInt8]) -> Void) {
        separate()
        body(&line)
    }

    /// A field already in COPY text (escaped, or `\N`), copied as it is.
    mutating func escaped(_ field: [UInt8]) {
        separate()
        line.append(contentsOf: field)
    }

    /// Fields already in COPY text, tabs between them (a run of an
    /// intent's fixed fields, ``AuditRowLayout/intentFixedFields``), copied as they are.
    mutating func escaped(_ fields: UnsafeBufferPointer<UInt8>) {
        separate()
        line.append(contentsOf: fields)
    }

    /// The fields written so far, without the newline ``finish()`` adds.
    var fields: [UInt8] { line }

    /// How many bytes the line holds so far (with what it started with).
    var count: Int { line.count }

    /// An integer's decimal digits, written straight into the line.
    mutating func integer(_ value: Int?) {
        separate()
        guard let value else {
            return null()
        }
        DecimalDigits.append(value, to: &line)
    }

    /// A `timestamptz` (RFC 3339, UTC, milliseconds), written straight into the line.
    mutating func timestamp(_ nanoseconds: UInt64?) {
        separate()
        guard let nanoseconds else {
            return null()
        }
        RFC3339.append(nanoseconds: nanoseconds, to: &line)
    }

    /// A `timestamptz` of an instant the line may already hold in another
    /// column: copied from there (`earlier`, its bytes in the line), else
    /// written and its bytes noted in `earlier`. A row's `recorded_at` and
    /// `finished_at` are one instant (an intent's `started_at` too), and
    /// formatting one cost ~430 instructions.
    mutating func timestamp(_ nanoseconds: UInt64, sameAs earlier: inout Range<Int>?) {
        separate()
        if let earlier {
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: earlier.count) { copy in
                line.withUnsafeBufferPointer { _ = copy.initialize(fromContentsOf: UnsafeBufferPointer(rebasing: $0[earlier])) }
                line.append(contentsOf: UnsafeBufferPointer(copy))
            }
            return
        }
        let start = line.count
        RFC3339.append(nanoseconds: nanoseconds, to: &line)
        earlier = start..<line.count
    }

    /// A `boolean`: `t` or `f`.
    mutating func boolean(_ value: Bool) {
        separate()
        line.append(UInt8(ascii: value ? "t" : "f"))
    }

    /// A `double precision`, as Swift prints it (shortest round-trip form:
    /// `String(value)`'s bytes), written straight into the line. Its digits,
    /// `.`, `e`, `+`, `-` (or `inf`, `nan`) need no escaping.
    mutating func double(_ value: Double) {
        separate()
        DoubleText.append(value, to: &line)
    }

    /// A `text[]`.
    mutating func textArray(_ values: [String]) {
        // Most sends hit no trap: the empty array needs no string built.
        guard !values.isEmpty else {
            separate()
            line.append(contentsOf: [UInt8(ascii: "{"), UInt8(ascii: "}")])
            return
        }
        text(CopyText.array(values))
    }

    mutating func finish() -> [UInt8] {
        line.append(0x0A)
        return line
    }
}
