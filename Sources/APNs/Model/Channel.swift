/// A broadcast channel id as APNs returned it: an opaque base64 string.
///
/// Channel ids must travel untouched; a trimmed, URL-decoded or re-encoded id
/// is `BadChannelId` (MS031). The relay therefore checks the alphabet and the
/// padding but never rewrites the value.
public struct ChannelID: Sendable, Hashable, CustomStringConvertible {
    /// Longest id accepted (APNs ids are far shorter; this bounds hostile input).
    public static let maximumLength = 256

    public let value: String

    public init(_ value: String) throws(APNsError) {
        if let rule = Self.brokenRule(value) {
            throw APNsError.preflight(value.isEmpty ? .missingChannelID : .badChannelID, field: "channelId", rule: rule)
        }
        self.value = value
    }

    /// Why `value` is not a channel id, or nil when it is one.
    public static func brokenRule(_ value: String) -> String? {
        let utf8 = Array(value.utf8)
        if utf8.isEmpty { return "must not be empty" }
        if utf8.count > maximumLength { return "must be at most \(maximumLength) characters (has \(utf8.count))" }
        let body = utf8.prefix(while: { $0 != UInt8(ascii: "=") })
        let padding = utf8.count - body.count
        let isBase64 = body.allSatisfy { byte in
            byte.isASCIIAlphanumeric || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/")
        }
        if !isBase64 || padding > 2 || utf8[body.count...].contains(where: { $0 != UInt8(ascii: "=") }) {
            return "must be the base64 string APNs returned, unchanged"
        }
        if utf8.count % 4 != 0 { return "must be the base64 string APNs returned, unchanged (length is not a multiple of 4)" }
        return nil
    }

    public var description: String { value }
}

/// What APNs keeps for devices that join a channel late.
public enum ChannelStoragePolicy: String, Sendable, Hashable, CaseIterable, Codable {
    /// Nothing is stored; broadcasts must carry `apns-expiration: 0`.
    case noStorage = "no-storage"
    /// The last broadcast is kept for devices that subscribe later.
    case mostRecentMessage = "most-recent-message"

    /// The `message-storage-policy` value of the channel-create body.
    public var wireValue: Int {
        switch self {
        case .noStorage: 0
        case .mostRecentMessage: 1
        }
    }

    /// The policy of a `message-storage-policy` value (APNs' read channel answer); nil for any other.
    public init?(wireValue: Int) {
        guard let policy = Self.allCases.first(where: { $0.wireValue == wireValue }) else { return nil }
        self = policy
    }
}

extension UInt8 {
    var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
            || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
    }
}
