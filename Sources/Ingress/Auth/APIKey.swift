import APNs
import RelayBasics
import Synchronization

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
    /// The backend's own APNs provider key: on the HTTP/2 APNs ingress the
    /// backend authenticates with the ES256 token it would send Apple,
    /// signed with this key, instead of the API key.
    public var providerKey: ProviderKey?
    /// A TLS client certificate that stands for this key on the HTTP/2 APNs
    /// ingress (`apns_ingress.client_ca_file`), for libraries that still
    /// authenticate to APNs with a certificate instead of a token.
    public var clientCertificate: ClientCertificateMatch?

    /// Which client certificate a key accepts: its SHA-256 fingerprint, or
    /// its subject (any certificate of the client CA with that subject).
    public enum ClientCertificateMatch: Sendable, Hashable {
        /// 64 lowercase hex digits, no colons.
        case sha256(String)
        /// OpenSSL's one-line form, compared exactly (`/O=Example/CN=backend`).
        case subject(String)

        public func matches(sha256: String, subject: String) -> Bool {
            switch self {
            case .sha256(let fingerprint): fingerprint == sha256
            case .subject(let name): name == subject
            }
        }
    }

    /// A provider key's public half, as a backend registered it with the relay.
    public struct ProviderKey: Sendable, Hashable {
        /// The token's `kid`.
        public var keyID: String
        /// The token's `iss`.
        public var teamID: String
        /// The P-256 public key, PEM.
        public var publicKeyPEM: String
        /// Where the PEM came from (shown by `check-config`).
        public var publicKeyFile: String?

        public init(keyID: String, teamID: String, publicKeyPEM: String) {
            self.keyID = keyID
            self.teamID = teamID
            self.publicKeyPEM = publicKeyPEM
        }
    }

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
///
/// A key that passed that check is remembered as presented (in memory only:
/// never logged, never written anywhere), so its next request is compared
/// with the remembered keys, again in constant time and against every one,
/// instead of being hashed again on every request (the SHA-256 and the
/// strings around it were most of the step's cost). Only a key that matched a configured hash is
/// remembered, at most one per configured key, so an unknown caller cannot
/// grow the memory or skip the hash.
public struct APIKeyring: Sendable {
    public let keys: [APIKey]
    private let verified: VerifiedKeys

    public init(keys: [APIKey]) {
        self.keys = keys
        verified = VerifiedKeys(capacity: keys.count)
    }

    /// The key for an `Authorization` header value, or nil.
    public func authenticate(authorization: String?) -> APIKey? {
        guard var authorization else { return nil }
        let ascii: APIKey?? = authorization.withUTF8 { header in
            guard header.allSatisfy({ $0 < 0x80 }) else { return .none }
            guard let token = Self.bearerToken(header, ascii: { $0 }) else { return .some(nil) }
            return .some(authenticate(presented: token))
        }
        if let ascii { return ascii }
        // Anything non-ASCII is read by Characters (a blank followed by a
        // combining mark is no blank), with the same rule as the bytes above.
        guard let presented = Self.bearerToken(authorization, ascii: \.asciiValue) else { return nil }
        return Array(presented.utf8).withUnsafeBufferPointer { authenticate(presented: $0[...]) }
    }

    /// How many keys are remembered (for tests: at most one per configured key, only verified ones).
    var rememberedKeys: Int { verified.count }

    /// The key whose secret is `presented` (not empty): a remembered key, or
    /// one whose hash matches (then remembered).
    private func authenticate(presented: Slice<UnsafeBufferPointer<UInt8>>) -> APIKey? {
        if let index = verified.match(presented) { return keys[index] }
        let digest = Fingerprint.sha256(Array(presented))
        var match: Int?
        for index in keys.indices where Self.constantTimeEqual(keys[index].hash, digest) {
            match = index
        }
        if let match { verified.remember(Array(presented), as: match) }
        return match.map { keys[$0] }
    }

    /// The token (not empty) after a `Bearer ` in any case, spaces and tabs
    /// trimmed around scheme and token: over an ASCII header's bytes, or
    /// over any header's Characters. `ascii` is a unit's ASCII value, nil
    /// for any other (which is neither a blank nor part of the scheme).
    static func bearerToken<Header: BidirectionalCollection>(_ header: Header, ascii: (Header.Element) -> UInt8?) -> Header.SubSequence? {
        let isBlank = { (unit: Header.Element) in ascii(unit) == UInt8(ascii: " ") || ascii(unit) == UInt8(ascii: "\t") }
        let trimmed = trimmingBlanks(header[...], isBlank)
        let scheme = "bearer ".utf8
        guard trimmed.count > scheme.count,
              zip(trimmed, scheme).allSatisfy({ unit, expected in
                  guard let byte = ascii(unit) else { return false }
                  return (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 == expected : byte == expected
              })
        else { return nil }
        let token = trimmingBlanks(trimmed.dropFirst(scheme.count), isBlank)
        return token.isEmpty ? nil : token
    }

    private static func trimmingBlanks<Units: BidirectionalCollection>(_ units: Units, _ isBlank: (Units.Element) -> Bool) -> Units.SubSequence {
        var units = units[...]
        while let first = units.first, isBlank(first) { units = units.dropFirst() }
        while let last = units.last, isBlank(last) { units = units.dropLast() }
        return units
    }

    static func bytesOfSHA256(_ text: String) -> [UInt8] {
        Fingerprint.sha256(Array(text.utf8))
    }

    /// Equal bytes, compared without an early exit: the time depends on
    /// `presented`'s length only, not on where it first differs. `secret`
    /// is never empty.
    static func constantTimeEqual(_ presented: some Collection<UInt8>, _ secret: [UInt8]) -> Bool {
        var difference: UInt8 = presented.count == secret.count ? 0 : 1
        let last = secret.count - 1
        for (offset, byte) in presented.enumerated() { difference |= byte ^ secret[min(offset, last)] }
        return difference == 0
    }
}

/// The keys presented and verified so far, with the index of their
/// configured key (see ``APIKeyring``).
private final class VerifiedKeys: Sendable {
    private let capacity: Int
    private let entries = Mutex<[(secret: [UInt8], index: Int)]>([])

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { entries.withLock { $0.count } }

    /// The configured key's index for `presented`. Every remembered key is
    /// compared, each over the whole presented length whatever it holds,
    /// so the time depends only on what the caller sent and how many keys
    /// were remembered: not on how close a guess came, nor on which matched.
    func match(_ presented: Slice<UnsafeBufferPointer<UInt8>>) -> Int? {
        entries.withLock { entries in
            var found: Int?
            for entry in entries where APIKeyring.constantTimeEqual(presented, entry.secret) { found = entry.index }
            return found
        }
    }

    /// Remembers a key that matched configured key `index` (once; at most one per configured key).
    func remember(_ secret: [UInt8], as index: Int) {
        entries.withLock { entries in
            guard entries.count < capacity, !entries.contains(where: { $0.index == index }) else { return }
            entries.append((secret, index))
        }
    }
}
