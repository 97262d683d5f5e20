/// Finds where an HTTP/1.1 chunked body ends (RFC 9112 7.1), fed its bytes
/// as they arrive and keeping none of them: the OTLP client reads a
/// collector's answer only to reuse the connection, and a collector that
/// streamed a chunked body without end made the client hold all of it.
struct ChunkedBodyScanner {
    enum State: Equatable {
        /// In a chunk-size line: its hex digits so far.
        case size
        /// Past the size, in a chunk extension (`;name=value`), ignored.
        case sizeExtension
        /// The size line's CR was read; its LF comes next.
        case sizeLF
        /// In a chunk's data: this many bytes left.
        case data(Int)
        /// After a chunk's data: its CRLF.
        case dataCR, dataLF
        /// After the last (zero) chunk: at the start of a trailer line, or an empty line that ends the body.
        case trailerLineStart
        case trailerLine, trailerLF
        /// The empty line's CR was read; its LF ends the body.
        case lastLF
        /// The body ended.
        case done
        /// Bytes that are not a chunked body.
        case malformed
    }

    private(set) var state = State.size
    private var size = 0
    private var digits = 0

    var finished: Bool { state == .done }
    var failed: Bool { state == .malformed }

    /// Reads `bytes` from the start; returns how many belong to the body:
    /// all of them, unless the body ended (or turned out malformed) first.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Int {
        var index = 0
        while index < bytes.count {
            if case .data(let left) = state {
                let taken = min(left, bytes.count - index)
                index += taken
                state = left == taken ? .dataCR : .data(left - taken)
                continue
            }
            guard state != .done, state != .malformed else { return index }
            step(bytes[index])
            index += 1
        }
        return index
    }

    private mutating func step(_ byte: UInt8) {
        switch state {
        case .size:
            if let digit = Self.hexValue(byte) {
                // A size past 2^40 bytes is no answer a collector sends.
                guard size < 1 << 36 else { return state = .malformed }
                size = size << 4 | digit
                digits += 1
            } else if digits > 0 && byte == UInt8(ascii: ";") {
                state = .sizeExtension
            } else if digits > 0 && byte == 13 {
                state = .sizeLF
            } else {
                state = .malformed
            }
        case .sizeExtension:
            if byte == 13 { state = .sizeLF }
        case .sizeLF:
            guard byte == 10 else { return state = .malformed }
            state = size == 0 ? .trailerLineStart : .data(size)
            size = 0
            digits = 0
        case .dataCR:
            state = byte == 13 ? .dataLF : .malformed
        case .dataLF:
            state = byte == 10 ? .size : .malformed
        case .trailerLineStart:
            state = byte == 13 ? .lastLF : .trailerLine
        case .trailerLine:
            if byte == 13 { state = .trailerLF }
        case .trailerLF:
            state = byte == 10 ? .trailerLineStart : .malformed
        case .lastLF:
            state = byte == 10 ? .done : .malformed
        case .data, .done, .malformed:
            break
        }
    }

    private static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): Int(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }
}
