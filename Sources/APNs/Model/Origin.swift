/// Where a request goes: an HTTPS host and port.
///
/// Production code gets origins from ``Environment``; tests and the mock APNs
/// use ``APNsEndpoints/overriding(send:channelManagement:)`` to point every
/// request at loopback.
public struct Origin: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `https://host:port`, the form logs and `describe` show.
    public var description: String { "https://\(host):\(port)" }

    /// The `:authority` pseudo-header: the port is omitted when it is 443.
    public var authority: String { port == 443 ? host : "\(host):\(port)" }
}

/// The pair of origins a client talks to for one environment.
public struct APNsEndpoints: Sendable, Hashable {
    /// Device sends and broadcasts.
    public var send: Origin
    /// Channel create, list and delete.
    public var channelManagement: Origin

    public init(send: Origin, channelManagement: Origin) {
        self.send = send
        self.channelManagement = channelManagement
    }

    /// Apple's hosts for `environment`; `useAlternativePort` picks 2197 for sends.
    public init(environment: Environment, useAlternativePort: Bool = false) {
        send = Origin(
            host: environment.sendHost,
            port: useAlternativePort ? Environment.alternativeSendPort : Environment.sendPort
        )
        channelManagement = Origin(host: environment.channelManagementHost, port: environment.channelManagementPort)
    }

    /// Both origins replaced, for tests against a mock APNs on loopback.
    public static func overriding(send: Origin, channelManagement: Origin? = nil) -> APNsEndpoints {
        APNsEndpoints(send: send, channelManagement: channelManagement ?? send)
    }
}
