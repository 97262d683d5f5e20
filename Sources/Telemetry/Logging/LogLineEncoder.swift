public import Logging
import RelayBasics

/// Writes one JSON log line straight into bytes: `{"ts":…,"level":…,
/// "logger":…,"msg":…, …metadata}` and a newline.
///
/// No `JSONValue` tree, no merged metadata dictionary: the handler's,
/// the provider's and the event's metadata are read where they are (the
/// event's wins over the provider's, which wins over the handler's), their
/// keys sorted as one small array, each value escaped into the output as it
/// is read. The bytes are those the `JSONValue` encoder wrote before.
public enum LogLineEncoder {
    /// The line for one event; `into` is cleared first and keeps its capacity.
    public static func encode(
        timestamp: String, level: Logger.Level, label: String, message: String,
        handler: Logger.Metadata, provided: Logger.Metadata?, event: Logger.Metadata?,
        into output: inout [UInt8]
    ) {
        output.removeAll(keepingCapacity: true)
        output.append(contentsOf: #"{"ts":"#.utf8)
        appendString(timestamp, to: &output)
        appendRest(level: level, label: label, message: message, handler: handler, provided: provided, event: event, to: &output)
    }

    /// ``encode(timestamp:level:label:message:handler:provided:event:into:)``
    /// with the time as `UnixTime` nanoseconds: the same bytes
    /// (`RFC3339.format(nanoseconds:)` in quotes, which needs no escaping),
    /// written straight into the line without a `String` in between.
    public static func encode(
        timestampNanoseconds: UInt64, level: Logger.Level, label: String, message: String,
        handler: Logger.Metadata, provided: Logger.Metadata?, event: Logger.Metadata?,
        into output: inout [UInt8]
    ) {
        output.removeAll(keepingCapacity: true)
        output.append(contentsOf: #"{"ts":""#.utf8)
        RFC3339.append(nanoseconds: timestampNanoseconds, to: &output)
        output.append(UInt8(ascii: "\""))
        appendRest(level: level, label: label, message: message, handler: handler, provided: provided, event: event, to: &output)
    }

    /// Everything after `"ts":…`: level, logger, message, the metadata by key.
    private static func appendRest(
        level: Logger.Level, label: String, message: String,
        handler: Logger.Metadata, provided: Logger.Metadata?, event: Logger.Metadata?,
        to output: inout [UInt8]
    ) {
        output.append(contentsOf: #","level":"#.utf8)
        appendString(level.rawValue, to: &output)
        output.append(contentsOf: #","logger":"#.utf8)
        appendString(label, to: &output)
        output.append(contentsOf: #","msg":"#.utf8)
        appendString(message, to: &output)

        // Keys and values apart: the sort reads only keys, and reading the
        // key of a (String, MetadataValue) pair copied the whole pair.
        let most = (event?.count ?? 0) + (provided?.count ?? 0) + handler.count
        var keys: [String] = []
        var values: [Logger.MetadataValue] = []
        keys.reserveCapacity(most)
        values.reserveCapacity(most)
        if let event {
            for (key, value) in event where !reserved(key) {
                keys.append(key)
                values.append(value)
            }
        }
        if let provided {
            for (key, value) in provided where event?[key] == nil && !reserved(key) {
                keys.append(key)
                values.append(value)
            }
        }
        for (key, value) in handler where event?[key] == nil && provided?[key] == nil && !reserved(key) {
            keys.append(key)
            values.append(value)
        }
        // The keys in UTF-8 byte order. Positions are sorted, not the
        // entries: moving a (String, MetadataValue) pair is a generic copy
        // with retains and releases, and the generic UTF-8 comparison walked
        // the views byte by byte; together they were half of the line's cost.
        withUnsafeTemporaryAllocation(of: Int.self, capacity: keys.count) { order in
            for index in order.indices { order[index] = index }
            keys.withUnsafeBufferPointer { keys in
                // Insertion sort: a line has a dozen keys, mostly in no order.
                for next in order.indices.dropFirst() {
                    let moving = order[next]
                    var slot = next
                    while slot > 0, keyPrecedes(keys[moving], keys[order[slot - 1]]) {
                        order[slot] = order[slot - 1]
                        slot -= 1
                    }
                    order[slot] = moving
                }
                values.withUnsafeBufferPointer { values in
                    for index in order {
                        output.append(UInt8(ascii: ","))
                        appendString(keys[index], to: &output)
                        output.append(UInt8(ascii: ":"))
                        appendValue(values[index], to: &output)
                    }
                }
            }
        }
        output.append(contentsOf: "}\n".utf8)
    }

    /// Whether `a` sorts before `b` by their UTF-8 bytes (what
    /// `a.utf8.lexicographicallyPrecedes(b.utf8)` answers), over the bytes in place.
    static func keyPrecedes(_ a: String, _ b: String) -> Bool {
        withBytes(a) { a in withBytes(b) { b in bytesPrecede(a, b) } }
    }

    static func reserved(_ key: String) -> Bool {
        // By length first: four comparisons of strings per key cost more than the key's bytes.
        switch key.utf8.count {
        case 2: key == "ts"
        case 3: key == "msg"
        case 5: key == "level"
        case 6: key == "logger"
        default: false
        }
    }

    /// Numbers and booleans stay JSON numbers and booleans, dictionaries
    /// become objects with sorted keys, arrays arrays; anything else its description.
    static func appendValue(_ value: Logger.MetadataValue, to output: inout [UInt8]) {
        switch value {
        case .string(let text):
            appendString(text, to: &output)
        case .stringConvertible(let convertible):
            switch convertible {
            case let number as Int: output.append(contentsOf: String(number).utf8)
            case let number as Int64: output.append(contentsOf: String(number).utf8)
            case let number as Int32: output.append(contentsOf: String(number).utf8)
            case let number as UInt32: output.append(contentsOf: String(number).utf8)
            case let number as Double where number.isFinite: output.append(contentsOf: numberText(number).utf8)
            case let flag as Bool: output.append(contentsOf: (flag ? "true" : "false").utf8)
            default: appendString(convertible.description, to: &output)
            }
        case .dictionary(let dictionary):
            output.append(UInt8(ascii: "{"))
            for (position, key) in dictionary.keys.sorted().enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                appendString(key, to: &output)
                output.append(UInt8(ascii: ":"))
                appendValue(dictionary[key]!, to: &output)
            }
            output.append(UInt8(ascii: "}"))
        case .array(let values):
            output.append(UInt8(ascii: "["))
            for (position, element) in values.enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                appendValue(element, to: &output)
            }
            output.append(UInt8(ascii: "]"))
        }
    }

    /// As `JSONValue`'s encoder: integral values without a fraction.
    static func numberText(_ value: Double) -> String {
        if value.rounded(.towardZero) == value, abs(value) < 1e15 { return String(Int64(value)) }
        return value.description
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// A JSON string: `"` and `\` escaped, control characters as `\n`, `\t`… or
    /// `\u00XX`, `/` and non-ASCII as they are (UTF-8).
    public static func appendString(_ string: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        let copied = string.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            if bytes.allSatisfy(plain) {
                output.append(contentsOf: bytes)
            } else {
                for byte in bytes { appendByte(byte, to: &output) }
            }
            return true
        }
        if copied == nil {
            for byte in string.utf8 { appendByte(byte, to: &output) }
        }
        output.append(UInt8(ascii: "\""))
    }

    @inline(__always)
    static func plain(_ byte: UInt8) -> Bool {
        byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }

    @inline(__always)
    static func appendByte(_ byte: UInt8, to output: inout [UInt8]) {
        if plain(byte) { output.append(byte); return }
        output.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""): output.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): output.append(UInt8(ascii: "\\"))
        case 0x0A: output.append(UInt8(ascii: "n"))
        case 0x0D: output.append(UInt8(ascii: "r"))
        case 0x09: output.append(UInt8(ascii: "t"))
        case 0x08: output.append(UInt8(ascii: "b"))
        case 0x0C: output.append(UInt8(ascii: "f"))
        default:
            output.append(contentsOf: "u00".utf8)
            output.append(hexDigits[Int(byte >> 4)])
            output.append(hexDigits[Int(byte & 0x0F)])
        }
    }
}
