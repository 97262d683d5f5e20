public import RelayBasics

/// A channel-management or broadcast request as an APNs client wrote it:
/// its `apns-*` headers and body, to go to APNs unchanged (apart from
/// `authorization`, which the relay owns). What the HTTP/2 APNs ingress
/// serves on `/1/apps/<bundle-id>/…` and `/4/broadcasts/apps/<bundle-id>`;
/// the app's builder supplies the bundle id (``RequestBuilder/rawChannel(_:)``).
public struct RawChannelRequest: Sendable, Hashable {
    /// Which of APNs' four channel requests it is.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// `POST /1/apps/<bundle-id>/channels`: APNs answers 201 with `apns-channel-id`.
        case create
        /// `GET /1/apps/<bundle-id>/all-channels`: APNs answers 200 with `{"channels": […]}`.
        case list
        /// `GET /1/apps/<bundle-id>/channels` naming the channel in `apns-channel-id`:
        /// APNs answers 200 with `{"message-storage-policy": …, "push-type": "LiveActivity"}`.
        case read
        /// `DELETE /1/apps/<bundle-id>/channels` naming the channel in `apns-channel-id`: 204.
        case delete
        /// `POST /4/broadcasts/apps/<bundle-id>` (iOS 18): one Live Activity update to every device on the channel.
        case broadcast

        /// The label metrics, traces and the audit row carry: the same as the relay's own channel routes'.
        public var operation: Operation {
            switch self {
            case .create: .channelCreate
            case .list: .channelList
            case .read: .channelRead
            case .delete: .channelDelete
            case .broadcast: .broadcast
            }
        }

        /// The method APNs serves the request with.
        public var method: HTTPMethod {
            switch self {
            case .create, .broadcast: .POST
            case .list, .read: .GET
            case .delete: .DELETE
            }
        }

        /// APNs' path for the app's bundle id.
        public func path(bundleID: String) -> String {
            switch self {
            case .create, .read, .delete: "/1/apps/\(bundleID)/channels"
            case .list: "/1/apps/\(bundleID)/all-channels"
            case .broadcast: "/4/broadcasts/apps/\(bundleID)"
            }
        }
    }

    public var kind: Kind
    /// The caller's `apns-*` headers, in its order.
    public var headers: [HTTPHeader]
    /// The body as the caller wrote it (empty for list, read and delete).
    public var body: [UInt8]

    public init(kind: Kind, headers: [HTTPHeader], body: [UInt8]) {
        self.kind = kind
        self.headers = headers
        self.body = body
    }
}
