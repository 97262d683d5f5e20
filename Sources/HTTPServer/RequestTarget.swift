import RelayBasics

/// The request target as the router and handlers see it.
///
/// libmicrohttpd is told to leave percent-escapes alone (its unescaping
/// turns `%00` into a NUL that silently cuts the path short), so the target
/// is decoded here, once, with one rule for the path and every query name and
/// value: escapes must be well formed and the decoded text must be UTF-8 with
/// no control characters. Anything else is refused (400) before a route runs.
///
/// Pure and total: any input yields an answer, never a trap.
enum RequestTarget {
    /// The path of `target` with an absolute-form target's scheme and
    /// authority removed (RFC 9112 §3.2.2: a server must accept
    /// `GET http://host/path`), still percent-encoded.
    static func originPath(_ target: String) -> String {
        // Origin form (nearly every request): nothing to remove, no lowercased copy to compare.
        if target.utf8.first == UInt8(ascii: "/") { return target }
        let lowercased = target.prefix(8).lowercased()
        guard lowercased.hasPrefix("http://") || lowercased.hasPrefix("https://"), let colon = target.firstIndex(of: ":") else {
            return target
        }
        let afterScheme = target[target.index(colon, offsetBy: 3)...]
        guard let slash = afterScheme.firstIndex(of: "/") else { return "/" }
        return String(afterScheme[slash...])
    }

    /// `text` percent-decoded; nil when an escape is malformed, the bytes are
    /// not UTF-8, or the result holds a control character (0x00–0x1F, 0x7F).
    static func decoded(_ text: String) -> String? {
        // Nearly every target has neither: answered from the string's own bytes, with no copy of them.
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "%") || isControl($0) }) else { return text }
        let input = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(input.count)
        var index = 0
        while index < input.count {
            let byte = input[index]
            guard byte == UInt8(ascii: "%") else {
                output.append(byte)
                index += 1
                continue
            }
            guard index + 2 < input.count, let high = Hex.value(of: input[index + 1]), let low = Hex.value(of: input[index + 2]) else {
                return nil
            }
            output.append(high << 4 | low)
            index += 3
        }
        guard !output.contains(where: isControl) else { return nil }
        return String(validating: output, as: UTF8.self)
    }

    private static func isControl(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F }
}
