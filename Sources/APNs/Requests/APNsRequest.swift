public import RelayBasics
public import RelayJSON

/// The exact HTTP/2 request one send issues, minus `authorization`, which the
/// client adds at send time so a built request never holds a credential.
///
/// Built once per logical send; besides the wire fields it carries what the
/// rest of the relay needs to know about the send (operation, apns-id, push
/// type, token fingerprint), which is why it is not the HTTP/2 module's
/// `HTTP2Request`. Each attempt turns it into one of those by adding the
/// current `authorization`; the headers are the same `HTTPHeader` values.
public struct APNsRequest: Sendable, Hashable {
    /// Which of an environment's two hosts the request goes to.
    public enum Destination: String, Sendable, Hashable {
        case send
        case channelManagement
    }

    public var operation: Operation
    public var method: HTTPMethod
    public var destination: Destination
    /// `:path`, e.g. `/3/device/<token>`.
    public var path: String
    /// Every header in the order it is sent.
    public var headers: [HTTPHeader]
    /// The encoded body; empty for GET and DELETE.
    public var body: [UInt8]
    /// The body as a value, for `describe` and logs.
    public var payload: JSONValue?

    /// The id that names this logical send; every attempt reuses it.
    public var apnsID: APNsID
    public var pushType: PushType?
    public var priority: Priority?
    public var topic: String?
    /// The target token's fingerprint (never the token).
    public var tokenFingerprint: String?
    public var channelID: String?

    /// The value of the first header called `name`.
    public func header(_ name: String) -> String? { headers.value(of: name) }

    /// The origin this request goes to under `endpoints`.
    public func origin(in endpoints: APNsEndpoints) -> Origin {
        destination == .send ? endpoints.send : endpoints.channelManagement
    }

    /// What the request would look like on the wire, with no I/O.
    public func describe(endpoints: APNsEndpoints) -> RequestDescription {
        RequestDescription(
            operation: operation, method: method, origin: origin(in: endpoints), path: path, headers: headers,
            payload: payload, byteCount: body.count
        )
    }
}

/// A send previewed: method, origin, path, headers (never `authorization`),
/// payload and its size in bytes. What `apns-relay describe` and
/// `POST /v1/describe` print.
public struct RequestDescription: Sendable, Hashable {
    public var operation: Operation
    public var method: HTTPMethod
    public var origin: Origin
    public var path: String
    public var headers: [HTTPHeader]
    public var payload: JSONValue?
    public var byteCount: Int

    /// The description as JSON, headers in send order.
    public var json: JSONValue {
        var object = JSONObject()
        object["operation"] = .string(operation.rawValue)
        object["method"] = .string(method.rawValue)
        object["origin"] = .string(origin.description)
        object["path"] = .string(path)
        object["headers"] = .object(JSONObject(headers.map { ($0.name, JSONValue.string($0.value)) }))
        object["payload"] = payload ?? .null
        object["bytes"] = .integer(Int64(byteCount))
        return .object(object)
    }
}
