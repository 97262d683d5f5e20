import RelayBasics

/// Checks of a request head that libmicrohttpd lets through, made before any
/// body byte is read.
///
/// A proxy in front of the relay and the relay must agree on where a request
/// ends, or a second request can be smuggled inside the first. So every head
/// whose framing two parsers could read differently is refused at once:
/// conflicting or repeated `Content-Length`, a repeated `Authorization` or
/// `Content-Type`, obs-fold continuation lines, `Content-Length` together with
/// `Transfer-Encoding`, header names that are not tokens (`Transfer-Encoding :`),
/// control characters in values. What can be answered without the body is
/// answered without it: a declared length over the limit (413) and a
/// transfer coding other than `chunked` (501).
///
/// Pure and total: any header list yields an answer, never a trap.
enum RequestFraming {
    /// Why a request head is refused.
    struct Refusal: Equatable, Sendable {
        var status: Int
        var type: HTTPRefusalType
        var message: String
        /// The header at fault, when one header is.
        var field: String? = nil
    }

    /// `foldedHeaders`: header lines libmicrohttpd read as obs-fold
    /// continuations (`apns_relay_mhd_folded_header_count`); it keeps them
    /// in no usable form, so any is refused (RFC 9112 §5.2 allows refusing).
    static func check(version: String, headers: [HTTPHeader], maximumBodyBytes: Int, foldedHeaders: Int = 0) -> Refusal? {
        if foldedHeaders > 0 {
            return invalid("a header line starts with a space or tab (obs-fold, RFC 9112 §5.2): send each header on one line")
        }
        // One pass that checks every header and counts the framing ones (every request takes it).
        var hosts = 0
        // Fields defined as one value (RFC 9110 §11.6.2, §8.3): a second copy
        // would be read by whichever parser picks first or last.
        var authorizations = 0
        var contentTypes = 0
        var lengths = 0
        var codings = 0
        var length: HTTPHeader?
        var coding: HTTPHeader?
        for header in headers {
            guard !header.name.isEmpty, header.name.utf8.allSatisfy(isTokenCharacter) else {
                return invalid("header name \(quoted(header.name)) is not a token: no spaces, separators or control characters before the colon")
            }
            guard !header.value.utf8.contains(where: isForbiddenInValue) else {
                return invalid("header \(quoted(header.name)) has a control character in its value", field: header.name)
            }
            switch header.name {
            case "host": hosts += 1
            case "authorization": authorizations += 1
            case "content-type": contentTypes += 1
            case "content-length":
                lengths += 1
                if length == nil { length = header }
            case "transfer-encoding":
                codings += 1
                if coding == nil { coding = header }
            default: break
            }
        }
        if hosts > 1 { return invalid("more than one Host header") }
        if version == "HTTP/1.1", hosts == 0 { return invalid("an HTTP/1.1 request needs a Host header") }
        if authorizations > 1 { return invalid("more than one Authorization header: send one credential", field: "authorization") }
        if contentTypes > 1 { return invalid("more than one Content-Type header", field: "content-type") }

        if lengths > 0, codings > 0 {
            return invalid("both Content-Length and Transfer-Encoding: send one, so the end of the body is unambiguous")
        }
        if lengths > 1 { return invalid("more than one Content-Length header") }
        if codings > 1 { return invalid("more than one Transfer-Encoding header") }
        // HTTP/1.0 has no transfer codings; an intermediary may not have applied it (RFC 9112 §6.1).
        if codings > 0, version != "HTTP/1.1" { return invalid("Transfer-Encoding needs HTTP/1.1") }
        if let coding {
            let value = coding.value.trimmingSpaces()
            guard value.lowercased() == "chunked" else {
                return Refusal(
                    status: 501, type: .notImplemented,
                    message: "Transfer-Encoding \(quoted(value)) is not supported; send the body with Content-Length or Transfer-Encoding: chunked")
            }
        }
        if let length {
            let digits = length.value.trimmingSpaces()
            guard !digits.isEmpty, digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
                return invalid("Content-Length must be a decimal number of bytes")
            }
            // Over 18 digits cannot fit an Int, and is over any limit anyway.
            if digits.utf8.count > 18 || Int(digits).map({ $0 > maximumBodyBytes }) ?? true {
                return Refusal(
                    status: 413, type: .payloadTooLarge,
                    message: "the declared Content-Length is over the \(maximumBodyBytes)-byte limit")
            }
        }
        return nil
    }

    private static func invalid(_ message: String, field: String? = nil) -> Refusal {
        Refusal(status: 400, type: .invalidRequest, message: message, field: field)
    }

    /// tchar (RFC 9110 §5.6.2): letters, digits and !#$%&'*+-.^_`|~
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// Controls other than HTAB, and DEL (RFC 9110 §5.5: field-vchar / SP / HTAB / obs-text).
    private static func isForbiddenInValue(_ byte: UInt8) -> Bool {
        (byte < 0x20 && byte != 0x09) || byte == 0x7F
    }

    /// A client's text for an error message: at most 64 characters, quoted.
    private static func quoted(_ text: String) -> String {
        let shown = text.count > 64 ? String(text.prefix(64)) + "…" : text
        return "'\(shown)'"
    }
}

extension String {
    /// Without leading and trailing spaces and tabs (optional whitespace, RFC 9110 §5.6.3).
    func trimmingSpaces() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return String(slice)
    }
}
