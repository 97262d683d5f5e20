/// The parts of an HTTP/1.1 answer's head that a keep-alive client needs to
/// read the answer fully and judge it: the status, the body's length and
/// whether the server closes the connection after it.
///
/// Parsed from the bytes as they came, without building strings or a header
/// list: the load generator reads one answer per send, and a `String` split of
/// every head cost more CPU than the rest of its work (docs/performance.md,
/// "The load generator's CPU per send").
struct HTTPAnswerHead: Equatable {
    var status: Int
    /// `Content-Length`; 0 when absent (the relay always sends it).
    var contentLength: Int
    /// `Connection: close`: the server ends the connection after this answer.
    var closes: Bool
    /// Bytes of the head, up to and including the blank line.
    var length: Int

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    /// The head at the start of `bytes`, nil while its blank line has not
    /// arrived; `searchedUpTo` carries, between calls on a growing buffer,
    /// how far the blank line was already looked for.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>, searchedUpTo: inout Int) throws(Malformed) -> HTTPAnswerHead? {
        var end = max(0, searchedUpTo - 3)
        while end + 3 < bytes.count, !(bytes[end] == 13 && bytes[end + 1] == 10 && bytes[end + 2] == 13 && bytes[end + 3] == 10) { end += 1 }
        guard end + 3 < bytes.count else {
            searchedUpTo = bytes.count
            return nil
        }
        searchedUpTo = 0
        // "HTTP/1.x SSS": the status is the three digits after the first space.
        guard end >= 12, spells(bytes, 0..<7, "HTTP/1.", foldingCase: false), bytes[8] == 32,
              let status = digits(bytes, 9..<12), bytes[12] == 32 || bytes[12] == 13
        else { throw Malformed(description: "bad status line") }
        var head = HTTPAnswerHead(status: status, contentLength: 0, closes: false, length: end + 4)
        var line = 0
        while bytes[line] != 13 || bytes[line + 1] != 10 { line += 1 }
        line += 2
        while line < end {
            var lineEnd = line
            while bytes[lineEnd] != 13 || bytes[lineEnd + 1] != 10 { lineEnd += 1 }
            if var colon = (line..<lineEnd).first(where: { bytes[$0] == UInt8(ascii: ":") }) {
                let name = line..<colon
                colon += 1
                while colon < lineEnd, bytes[colon] == 32 || bytes[colon] == 9 { colon += 1 }
                var valueEnd = lineEnd
                while valueEnd > colon, bytes[valueEnd - 1] == 32 || bytes[valueEnd - 1] == 9 { valueEnd -= 1 }
                let value = colon..<valueEnd
                if spells(bytes, name, "content-length") {
                    guard let length = digits(bytes, value) else { throw Malformed(description: "bad content-length") }
                    head.contentLength = length
                } else if spells(bytes, name, "connection") {
                    head.closes = spells(bytes, value, "close")
                } else if spells(bytes, name, "transfer-encoding") {
                    throw Malformed(description: "transfer-encoding is not supported (the relay answers with content-length)")
                }
            }
            line = lineEnd + 2
        }
        return head
    }

    /// The decimal number spelled by `range` (1 to 18 digits, nothing else).
    private static func digits(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int? {
        guard !range.isEmpty, range.count <= 18 else { return nil }
        var value = 0
        for index in range {
            let digit = Int(bytes[index]) - 48
            guard (0...9).contains(digit) else { return nil }
            value = value * 10 + digit
        }
        return value
    }

    /// Whether `range` spells `lowercase`, in any case (ASCII) unless `foldingCase` is false.
    private static func spells(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ lowercase: StaticString, foldingCase: Bool = true) -> Bool {
        guard range.count == lowercase.utf8CodeUnitCount else { return false }
        let expected = lowercase.utf8Start
        for (offset, index) in range.enumerated() {
            let byte = bytes[index]
            let folded = foldingCase && (65...90).contains(byte) ? byte | 0x20 : byte
            if folded != expected[offset] { return false }
        }
        return true
    }
}
