/// Where OTLP/HTTP trace requests go: a full traces URL, parsed.
public struct OTLPEndpoint: Sendable, Equatable, CustomStringConvertible {
    public enum Scheme: String, Sendable {
        case http, https
    }

    public var scheme: Scheme
    /// Without brackets for an IPv6 literal.
    public var host: String
    public var port: UInt16
    /// The request target, `/v1/traces` for a base URL.
    public var path: String

    /// Parses `http(s)://host[:port][/path]`; nil when it is not one (no
    /// scheme, another scheme, no host, a bad port, userinfo, a query or fragment).
    public init?(url: String) {
        let scheme: Scheme
        var rest: Substring
        if url.lowercased().hasPrefix("http://") {
            scheme = .http
            rest = url.dropFirst(7)
        } else if url.lowercased().hasPrefix("https://") {
            scheme = .https
            rest = url.dropFirst(8)
        } else {
            return nil
        }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let path = rest[authorityEnd...]
        guard !authority.isEmpty, !authority.contains("@"), !path.contains("?"), !path.contains("#"),
              !authority.contains("?"), !authority.contains("#")
        else { return nil }
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty else { return nil }
        var port: UInt16 = scheme == .https ? 443 : 80
        if let portText {
            guard let value = UInt16(portText), value > 0 else { return nil }
            port = value
        }
        rest = path
        self.scheme = scheme
        self.host = String(host)
        self.port = port
        self.path = rest.isEmpty ? "/" : String(rest)
    }

    /// The traces URL under a base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`,
    /// `tracing.endpoint`), as the OpenTelemetry specification builds it.
    public static func tracesURL(base: String) -> String {
        base.hasSuffix("/") ? base + "v1/traces" : base + "/v1/traces"
    }

    /// The `Host` header's value.
    var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        let defaultPort: UInt16 = scheme == .https ? 443 : 80
        return port == defaultPort ? name : "\(name):\(port)"
    }

    public var description: String { "\(scheme.rawValue)://\(hostHeader)\(path)" }
}
