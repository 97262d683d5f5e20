import RelayBasics

/// One connection's request of the load generator, head and body, built once:
/// each send rewrites only its tokens' last 16 hex digits in place, so a send
/// to fresh devices costs no formatting and no allocation. Every token is 64
/// hex digits (48 zeros, then the number), so the length never changes.
struct LoadRequest {
    /// The whole request as it goes on the wire.
    private(set) var bytes: [UInt8]
    /// Where each item's token's variable 16 digits start.
    private let tokenDigits: [Int]

    /// - Parameters:
    ///   - items: sends per request; `batch` wraps them in `{"items":[…]}`.
    ///   - template: one send's text before and after its token.
    init(path: String, host: String, port: UInt16, apiKey: String, template: (prefix: [UInt8], suffix: [UInt8]), items: Int, batch: Bool) {
        var body: [UInt8] = []
        var digits: [Int] = []
        body.reserveCapacity((template.prefix.count + template.suffix.count + 65) * items + 16)
        if batch { body.append(contentsOf: #"{"items":["#.utf8) }
        for index in 0..<items {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body.append(contentsOf: template.prefix)
            body.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: 64))
            digits.append(body.count - 16)
            body.append(contentsOf: template.suffix)
        }
        if batch { body.append(contentsOf: "]}".utf8) }
        let head = "POST \(path) HTTP/1.1\r\nhost: \(host):\(port)\r\ncontent-length: \(body.count)\r\n"
            + "authorization: Bearer \(apiKey)\r\ncontent-type: application/json\r\n\r\n"
        bytes = Array(head.utf8) + body
        tokenDigits = digits.map { $0 + head.utf8.count }
    }

    /// Addresses the request's items to token numbers `first + 1`, `first + 2`, … (in hex).
    mutating func address(first: Int) {
        let tokenDigits = tokenDigits
        bytes.withUnsafeMutableBufferPointer { bytes in
            for (item, start) in tokenDigits.enumerated() {
                var value = UInt64(truncatingIfNeeded: first + item + 1)
                for offset in (0..<16).reversed() {
                    bytes[start + offset] = Hex.digit(UInt8(truncatingIfNeeded: value & 15))
                    value >>= 4
                }
            }
        }
    }

}
