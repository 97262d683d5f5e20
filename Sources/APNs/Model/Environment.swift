/// An APNs environment: which Apple servers a send goes to.
///
/// Tokens, channels and (for some keys) provider tokens are scoped to one
/// environment; sending a development token to production answers
/// `BadDeviceToken` (MS014).
public enum Environment: String, Sendable, Hashable, CaseIterable, Codable {
    /// Development builds: dev clients and TestFlight development profiles.
    case development
    /// App Store and TestFlight production builds.
    case production

    /// Accepts the spellings operators use: `development`, `sandbox`, `dev`,
    /// `production`, `prod`.
    public init?(name: String) {
        // The canonical spellings, as nearly every request writes them, without a lowercased copy.
        if name == "development" { self = .development; return }
        if name == "production" { self = .production; return }
        switch name.lowercased() {
        case "development", "sandbox", "dev": self = .development
        case "production", "prod": self = .production
        default: return nil
        }
    }

    /// The host for device sends and broadcasts.
    public var sendHost: String {
        switch self {
        case .development: "api.sandbox.push.apple.com"
        case .production: "api.push.apple.com"
        }
    }

    /// The host for channel management (create, list, delete).
    public var channelManagementHost: String {
        switch self {
        case .development: "api-manage-broadcast.sandbox.push.apple.com"
        case .production: "api-manage-broadcast.push.apple.com"
        }
    }

    /// Channel management listens on its own port per environment.
    public var channelManagementPort: Int {
        switch self {
        case .development: 2195
        case .production: 2196
        }
    }

    /// The standard HTTPS port for sends.
    public static let sendPort = 443
    /// The alternative send port Apple keeps open for networks that block 443.
    public static let alternativeSendPort = 2197
}
