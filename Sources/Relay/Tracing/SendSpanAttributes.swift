public import Tracing

/// The `apns.send` span's attributes known when it starts, as one value:
/// set in one call (``SpanAttributeWriter/set(_:)``) instead of ten.
///
/// Each `set(key, value)` on the send path paid for a generic conversion to
/// `SpanAttribute`, a call through an existential and the span's lock, and
/// the OTLP span then appended each attribute's bytes on its own (issue 26).
/// The keys and values are the same as when they were set one by one, in the
/// same order (docs/operations.md lists them).
public struct SendSpanAttributes: Sendable {
    public var operation: String
    public var app: String
    public var environment: String
    public var apnsID: String
    public var payloadBytes: Int
    public var pushType: String?
    public var priority: Int?
    /// The device token's fingerprint, never the token.
    public var tokenFingerprint: String?
    public var channelID: String?
    public var snapshotID: String?

    public init(
        operation: String, app: String, environment: String, apnsID: String, payloadBytes: Int,
        pushType: String? = nil, priority: Int? = nil, tokenFingerprint: String? = nil,
        channelID: String? = nil, snapshotID: String? = nil
    ) {
        self.operation = operation
        self.app = app
        self.environment = environment
        self.apnsID = apnsID
        self.payloadBytes = payloadBytes
        self.pushType = pushType
        self.priority = priority
        self.tokenFingerprint = tokenFingerprint
        self.channelID = channelID
        self.snapshotID = snapshotID
    }

    /// Each attribute set, in ``forEach(_:)``'s order, as its value is
    /// held: `text` for a string, else `number` (no `SpanAttribute` made),
    /// for an encoder that writes them straight from the struct.
    public func forEachValue(_ body: (_ key: StaticString, _ text: String?, _ number: Int) -> Void) {
        body("apns.operation", operation, 0)
        body("apns.app", app, 0)
        body("apns.environment", environment, 0)
        body("apns.id", apnsID, 0)
        body("apns.payload_bytes", nil, payloadBytes)
        if let pushType { body("apns.push_type", pushType, 0) }
        if let priority { body("apns.priority", nil, priority) }
        if let tokenFingerprint { body("apns.token_fingerprint", tokenFingerprint, 0) }
        if let channelID { body("apns.channel_id", channelID, 0) }
        if let snapshotID { body("surface.snapshot_id", snapshotID, 0) }
    }

    /// Every key ``forEach(_:)`` may set, present or not.
    public static let keys: [String] = [
        "apns.operation", "apns.app", "apns.environment", "apns.id", "apns.payload_bytes", "apns.push_type",
        "apns.priority", "apns.token_fingerprint", "apns.channel_id", "surface.snapshot_id",
    ]

    /// Each attribute set, in order: a string's value as `.string`, a number's as `.int64`.
    public func forEach(_ body: (_ key: String, _ value: SpanAttribute) -> Void) {
        body("apns.operation", .string(operation))
        body("apns.app", .string(app))
        body("apns.environment", .string(environment))
        body("apns.id", .string(apnsID))
        body("apns.payload_bytes", .int64(Int64(payloadBytes)))
        if let pushType { body("apns.push_type", .string(pushType)) }
        if let priority { body("apns.priority", .int64(Int64(priority))) }
        if let tokenFingerprint { body("apns.token_fingerprint", .string(tokenFingerprint)) }
        if let channelID { body("apns.channel_id", .string(channelID)) }
        if let snapshotID { body("surface.snapshot_id", .string(snapshotID)) }
    }
}
