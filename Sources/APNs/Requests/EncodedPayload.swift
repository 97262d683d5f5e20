public import RelayJSON

/// A device payload whose shape was checked (``Preflight/checkPayloadShape(_:field:)``)
/// and whose bytes were encoded once, for many sends of it: a batch's sends
/// of one snapshot to many tokens build their requests around the same
/// bytes instead of encoding the same JSON once per token. The size limit
/// is still checked per request (it depends on the push type).
public struct EncodedPayload: Sendable {
    /// The payload as JSON (an ``APNsRequest`` keeps it).
    public let payload: JSONValue
    /// Its encoding, the request's body.
    let body: [UInt8]

    /// Checks the payload's shape and encodes it.
    /// - Throws: ``APNsError`` `InvalidPayload`, as a send of it would.
    public init(_ payload: JSONValue) throws(APNsError) {
        try Preflight.checkPayloadShape(payload)
        self.payload = payload
        body = payload.encoded()
    }
}
