import Testing
@testable import Telemetry

/// The OTLP client's reader of a collector's chunked answer: where the body
/// ends, whatever the reads it comes in, and what is not a chunked body.
@Suite("chunked answer bodies")
struct ChunkedBodyScannerTests {
    /// Feeds `bytes` in pieces cut at `cuts`; returns the scanner and how many bytes it took.
    static func scan(_ bytes: [UInt8], cuts: [Int] = []) -> (ChunkedBodyScanner, taken: Int) {
        var scanner = ChunkedBodyScanner()
        var taken = 0
        var start = 0
        for end in cuts + [bytes.count] where end >= start {
            let piece = Array(bytes[start..<end])
            let used = piece.withUnsafeBytes { scanner.feed($0) }
            taken += used
            if used < piece.count || scanner.finished || scanner.failed { return (scanner, taken) }
            start = end
        }
        return (scanner, taken)
    }

    static let body = Array("1a;name=value\r\nabcdefghijklmnopqrstuvwxyz\r\n3\r\n\r\n\n\r\n0\r\nx-trailer: 1\r\n\r\n".utf8)

    @Test("a body with an extension, data holding CR and LF, and a trailer ends at its empty line, fed whole, a byte at a time, or cut anywhere")
    func endsWhereItEnds() {
        let whole = Self.scan(Self.body)
        #expect(whole.0.finished && whole.taken == Self.body.count)
        let bytewise = Self.scan(Self.body, cuts: Array(1..<Self.body.count))
        #expect(bytewise.0.finished && bytewise.taken == Self.body.count)
        for cut in 1..<Self.body.count {
            let split = Self.scan(Self.body, cuts: [cut])
            #expect(split.0.finished && split.taken == Self.body.count, "cut at \(cut)")
        }
    }

    @Test("bytes after the body are not taken; a body not yet ended is neither finished nor failed")
    func stopsAtTheEnd() {
        let (scanner, taken) = Self.scan(Self.body + Array("HTTP/1.1 200".utf8))
        #expect(scanner.finished && taken == Self.body.count)
        let partial = Self.scan(Array(Self.body.dropLast(2)))
        #expect(!partial.0.finished && !partial.0.failed && partial.taken == Self.body.count - 2)
        let empty = Self.scan(Array("0\r\n\r\n".utf8))
        #expect(empty.0.finished && empty.taken == 5)
    }

    @Test("what is not a chunked body fails: no size, a size that is not hex, data without its CRLF, a bare LF, a size past any answer")
    func malformed() {
        for text in ["\r\n", "xyz\r\n", ";ext\r\n", "3\r\nabcX", "3\nabc\r\n", "3\r\nabc\r\n0\r\n\rX", "ffffffffffff\r\n"] {
            let (scanner, _) = Self.scan(Array(text.utf8))
            #expect(scanner.failed, "\(text.debugDescription)")
        }
    }
}
