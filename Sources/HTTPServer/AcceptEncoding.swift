/// Content negotiation for `Accept-Encoding` (RFC 9110 §12.5.3).
///
/// The header comes from the client byte for byte, so the parser is total:
/// any input, however malformed (`;`, `,,`, `gzip;q=`, `;;q=1`), yields an
/// answer, never a trap. Anything it cannot read counts as "not accepted",
/// and the response goes out uncompressed.
enum AcceptEncoding {
    /// Whether a response may be gzipped for a client that sent `header`.
    ///
    /// `gzip` (or `x-gzip`) with a weight above 0 accepts; failing that, `*`
    /// with a weight above 0 accepts unless `gzip` is listed with q=0.
    static func acceptsGzip(_ header: String) -> Bool {
        var gzipWeight: Bool?
        var wildcardWeight: Bool?
        for member in Array(header.utf8).split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true) {
            let parameters = member.split(separator: UInt8(ascii: ";"), omittingEmptySubsequences: false)
            guard let first = parameters.first else { continue }
            let coding = trimmed(first)
            guard !coding.isEmpty else { continue }
            var accepted = true
            for parameter in parameters.dropFirst() {
                let text = trimmed(parameter)
                guard text.count >= 2, lowercased(text[text.startIndex]) == UInt8(ascii: "q"),
                      text[text.index(after: text.startIndex)] == UInt8(ascii: "=")
                else { continue }
                accepted = positiveWeight(Array(text.dropFirst(2)))
            }
            if equalsIgnoringCase(coding, "gzip") || equalsIgnoringCase(coding, "x-gzip") {
                gzipWeight = (gzipWeight ?? false) || accepted
            } else if coding.elementsEqual("*".utf8) {
                wildcardWeight = (wildcardWeight ?? false) || accepted
            }
        }
        if let gzipWeight { return gzipWeight }
        return wildcardWeight ?? false
    }

    /// A qvalue (`0`, `0.5`, `1.000`) above zero; a malformed one counts as 0.
    private static func positiveWeight(_ bytes: [UInt8]) -> Bool {
        // qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
        guard let first = bytes.first, bytes.count <= 5 else { return false }
        let fraction = bytes.dropFirst()
        if !fraction.isEmpty {
            guard fraction.first == UInt8(ascii: "."),
                  fraction.dropFirst().allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
            else { return false }
        }
        switch first {
        case UInt8(ascii: "1"): return fraction.dropFirst().allSatisfy { $0 == UInt8(ascii: "0") }
        case UInt8(ascii: "0"): return fraction.dropFirst().contains { $0 != UInt8(ascii: "0") }
        default: return false
        }
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { slice = slice.dropFirst() }
        while let last = slice.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { slice = slice.dropLast() }
        return slice
    }

    private static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ word: String) -> Bool {
        bytes.count == word.utf8.count && zip(bytes, word.utf8).allSatisfy { lowercased($0) == $1 }
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 0x20 : byte
    }
}
