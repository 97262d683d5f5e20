/// One HTTP header field, name lowercase.
///
/// The one header type from the request builder to the wire and back: an
/// `APNsRequest`'s headers, the HTTP/2 client's request and response, the
/// HTTP/2 server's and the mock's exchanges all hold `[HTTPHeader]`, so a
/// send passes its headers down without converting them. Names are
/// lowercased once, here, as HTTP/2 requires (RFC 9113 §8.2.1); the name is
/// immutable so the rule cannot be broken later.
public struct HTTPHeader: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name.lowercasedHeaderName
        self.value = value
    }

    public var description: String { "\(name): \(value)" }
}

extension Sequence where Element == HTTPHeader {
    /// The value of the first header called `name` (any case), or nil.
    /// Inlinable so each caller's `[HTTPHeader]` gets a specialised copy: the
    /// generic one walked the array through `IndexingIterator`'s witness
    /// table, and every request and response looks up a few headers.
    @inlinable
    public func value(of name: String) -> String? {
        let lowered = name.lowercasedHeaderName
        return first(where: { $0.name == lowered })?.value
    }
}

extension String {
    /// `lowercased()`, without its cost for the usual case: header names
    /// are nearly always lowercase ASCII already (HTTP/2 requires it, and
    /// the relay writes its own that way), and then the name itself is the
    /// answer, with no new string. Anything else takes `lowercased()`.
    /// Public for other values mostly lowercase already (the mock APNs's
    /// echoed `apns-id`).
    public var lowercasedHeaderName: String {
        let alreadyLower = allUTF8Bytes { $0 < 0x80 && !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
        return alreadyLower ? self : lowercased()
    }
}
