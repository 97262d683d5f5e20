import RelayJSON

/// The longest value the ingress accepts for each string that can reach an
/// audit column, a log line, a span attribute or an error message, in UTF-8
/// bytes. docs/api.md ("Field sizes") lists the same numbers, and
/// openapi.yaml's `maxLength` where the field is in the schema.
///
/// Checked before anything else looks at the value (authorization, snapshot
/// validation, the audit), so an oversized value is answered with a 400
/// naming the field and is never recorded, logged or held past the request.
enum FieldLimits {
    /// `app` (body, query, `apns-relay-app`): the configuration allows app
    /// names of 1 to 64 letters, digits, '-', '_' or '.'.
    static let app = 64
    /// `snapshot.id` and `snapshot.surfaceId`: the audit's `snapshot_id` and `surface_id`.
    static let snapshotIdentifier = 256
    /// `channelId` (broadcast, `DELETE /v1/channels/{channelId}`): APNs'
    /// channel ids are 24 base64 characters; openapi.yaml's ChannelId allows 256; the audit's `channel_id`.
    static let channelID = 256
    /// `attributesType` (Live Activity start): a Swift type name.
    static let attributesType = 256
    /// A raw send's `headers` (and `/3/device`'s `apns-*` headers): at most
    /// this many, each name and value at most these sizes. `apns-topic`
    /// becomes the audit's `topic`.
    static let rawHeaders = 16
    static let headerName = 64
    static let headerValue = 256

    /// Throws 400 naming `field` when `text` is over `maximum` bytes.
    static func check(_ text: String, _ maximum: Int, field: String) throws(IngressError) {
        let size = text.utf8.count
        if size > maximum { throw .invalid(field, "must be at most \(maximum) bytes (is \(size))") }
    }

    /// ``check(_:_:field:)`` for a member of a JSON object that may be any
    /// type: only a string is measured (a wrong type is refused later, by
    /// the reader that expects the right one).
    static func check(member key: String, of value: JSONValue, _ maximum: Int, field: String) throws(IngressError) {
        guard case .object(let object) = value, case .string(let text)? = object[key] else { return }
        try check(text, maximum, field: field)
    }
}
