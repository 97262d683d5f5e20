public import APNs
public import RelayJSON
public import Surfaces
public import RelayBasics

/// One logical send, as a backend asks for it.
public enum RelayOperation: Sendable {
    /// An alert from a Live Activity snapshot (the fallback alert).
    case alert(token: String, snapshot: LiveSurfaceSnapshot, options: DeviceSendOptions = .init())
    /// An alert from a notification snapshot.
    case notification(token: String, snapshot: LiveSurfaceSnapshot, options: DeviceSendOptions = .init())
    case background(token: String, customData: JSONObject = JSONObject(), options: DeviceSendOptions = .init())
    /// Remote start to a push-to-start token. `attributes` defaults to the
    /// snapshot's `{surfaceId, modeLabel}`, `attributesType` to the SDK's type.
    case start(token: String, snapshot: LiveSurfaceSnapshot, attributes: JSONValue? = nil, attributesType: String? = nil, live: LiveActivityOptions = .init(), options: DeviceSendOptions = .init())
    case update(token: String, snapshot: LiveSurfaceSnapshot, live: LiveActivityOptions = .init(), options: DeviceSendOptions = .init())
    case end(token: String, snapshot: LiveSurfaceSnapshot, live: LiveActivityOptions = .init(), options: DeviceSendOptions = .init())
    /// A WidgetKit reload (push type `widgets`) to a widget push token, for a
    /// `widget`, `standby`, `lockAccessory` or `control` snapshot.
    case widget(token: String, snapshot: LiveSurfaceSnapshot, options: DeviceSendOptions = .init())
    case broadcast(channelID: String, snapshot: LiveSurfaceSnapshot, storagePolicy: ChannelStoragePolicy? = nil, live: LiveActivityOptions = .init(), options: DeviceSendOptions = .init())
    case createChannel(storagePolicy: ChannelStoragePolicy = .noStorage)
    case listChannels
    case deleteChannel(channelID: String)
    /// APNs' read channel: one channel's storage policy and push type.
    case readChannel(channelID: String)
    /// The caller's own payload and `apns-*` headers.
    /// `bytes`: the payload as the caller wrote it (it parses to `payload`),
    /// sent as it is; nil sends `payload` encoded.
    case raw(token: String, payload: JSONValue, headers: [HTTPHeader], bytes: [UInt8]? = nil)
    /// A channel create, list or delete, or a broadcast, with the caller's
    /// own `apns-*` headers and body (the HTTP/2 APNs ingress); audited and
    /// counted under the operation of its kind, as the relay's own channel
    /// routes and broadcasts are.
    case rawChannel(RawChannelRequest)

    /// The SDK's default ActivityKit attributes type name.
    public static let defaultAttributesType = "MobileSurfacesActivityAttributes"

    /// The snapshot, when the operation carries one.
    public var snapshot: LiveSurfaceSnapshot? {
        switch self {
        case .alert(_, let snapshot, _), .notification(_, let snapshot, _), .start(_, let snapshot, _, _, _, _),
             .update(_, let snapshot, _, _), .end(_, let snapshot, _, _), .broadcast(_, let snapshot, _, _, _),
             .widget(_, let snapshot, _):
            snapshot
        default: nil
        }
    }

    public var operation: Operation {
        switch self {
        case .alert: .alert
        case .notification: .notification
        case .background: .background
        case .start: .start
        case .update: .update
        case .end: .end
        case .widget: .widget
        case .broadcast: .broadcast
        case .createChannel: .channelCreate
        case .listChannels: .channelList
        case .deleteChannel: .channelDelete
        case .readChannel: .channelRead
        case .raw: .raw
        case .rawChannel(let request): request.kind.operation
        }
    }
}

/// Live Activity fields a caller may set beside the snapshot.
public struct LiveActivityOptions: Sendable, Hashable {
    /// Unix seconds; now when nil. Must grow per activity token.
    public var timestamp: Int64?
    public var staleDate: Int64?
    public var dismissalDate: Int64?
    public var relevanceScore: Double?
    /// Replaces the snapshot's content-state (the smoke script's --state-file).
    public var contentState: JSONValue?

    public init(timestamp: Int64? = nil, staleDate: Int64? = nil, dismissalDate: Int64? = nil, relevanceScore: Double? = nil, contentState: JSONValue? = nil) {
        self.timestamp = timestamp
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
        self.contentState = contentState
    }
}
