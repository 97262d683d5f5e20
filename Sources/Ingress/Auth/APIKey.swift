import APNs
import RelayBasics

/// A backend's API key, as configured: only its SHA-256 is kept, so the
/// configuration file does not hold a usable secret.
public struct APIKey: Sendable, Hashable {
    /// Recorded as `caller` in the audit table and used in rate limiting.
    public var name: String
    /// SHA-256 of the key, 32 bytes.
    public var hash: [UInt8]
    /// Apps the key may send for; nil means every app.
    public var apps: Set<String>?
    /// Admin keys may change the retry kill switch.
    public var isAdmin: Bool
    /// Sustained requests per second and burst for the key's token bucket; nil: unlimited.
    public var ratePerSecond: Double?
    public var burst: Double?

    /// - Parameter sha256Hex: 64 hex digits (`printf %s "$KEY" | sha256sum`).
    public init?(name: String, sha256Hex: String, apps: Set<String>?, isAdmin: Bool = false, ratePerSecond: Double? = nil, burst: Double? = nil) {
        guard let hash = Hex.decode(sha256Hex), hash.count == 32 else { return nil }
        self.name = name
        self.hash = hash
        self.apps = apps
        self.isAdmin = isAdmin
        self.ratePerSecond = ratePerSecond
        self.burst = burst
    }

    public func allows(app: String) -> Bool { apps?.contains(app) ?? true }
}

/// Finds the key a request presents.
///
/// The presented key is hashed and compared with every configured hash in
/// constant time, without stopping at the first match, so response timing
/// tells nothing about how close a guess was or which key matched.
public struct APIKeyring: Sendable {
    public let keys: [APIKey]

    public init(keys: [APIKey]) { self.keys = keys }

    /// The key for an `Authorization` header value, or nil.
    public func authenticate(authorization: String?) -> APIKey? {
        guard let authorization, let presented = Self.bearerToken(authorization), !presented.isEmpty else { return nil }
        let digest = APIKeyring.bytesOfSHA256(presented)
        var match: APIKey?
        for key in keys where Self.constantTimeEqual(key.hash, digest) {
            match = key
        }
        return match
    }

    static func bearerToken(_ header: String) -> String? {
        let trimmed = header.trimmingWhitespace()
        guard trimmed.count > 7, trimmed.prefix(7).lowercased() == "bearer " else { return nil }
        return String(trimmed.dropFirst(7)).trimmingWhitespace()
    }

    static func bytesOfSHA256(_ text: String) -> [UInt8] {
        Fingerprint.sha256(Array(text.utf8))
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
