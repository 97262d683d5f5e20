import RelayBasics
import RelayJSON
import Synchronization

/// Checks `authorization: bearer <JWT>` the way APNs does: ES256 signature
/// against the registered key, `kid` known, `iss` the key's team, and an
/// `iat` no older than one hour.
///
/// Each distinct token is decoded and its signature verified once; later
/// requests with the same token only re-check its age. That is how APNs
/// behaves too, and it keeps the mock cheap under load tests.
public final class ProviderTokenVerifier: Sendable {
    /// A provider key APNs knows: its id, its team, and its public key.
    public struct RegisteredKey: Sendable {
        public var keyID: String
        public var teamID: String
        public var publicKeyPEM: String

        public init(keyID: String, teamID: String, publicKeyPEM: String) {
            self.keyID = keyID
            self.teamID = teamID
            self.publicKeyPEM = publicKeyPEM
        }
    }

    /// How old a token may be before APNs answers ExpiredProviderToken.
    public static let maximumAgeSeconds: Int64 = 3600
    /// Tolerated clock difference for tokens issued "in the future".
    public static let futureSkewSeconds: Int64 = 300

    private struct Decoded: Sendable {
        var keyID: String
        var issuedAt: Int64
        /// nil when the token verified; otherwise the APNs reason to answer.
        var rejection: String?
    }

    private let keys: [String: (teamID: String, key: ES256PublicKey)]
    private let now: @Sendable () -> Int64
    private struct Cache {
        var byToken: [String: Decoded] = [:]
        /// The last `authorization` value and its token's entry (always one
        /// of `byToken`'s): a provider sends one token for up to an hour, so
        /// most requests find it by one comparison, without a new string for
        /// the token and a hash of all of it.
        var last: (authorization: String, decoded: Decoded)?
    }

    private let cache = Mutex(Cache())
    private let verifications = Atomic<Int>(0)

    /// - Throws: when a registered public key is not a P-256 PEM.
    public init(keys: [RegisteredKey], now: @escaping @Sendable () -> Int64) throws {
        var table: [String: (teamID: String, key: ES256PublicKey)] = [:]
        for key in keys {
            table[key.keyID] = (key.teamID, try ES256PublicKey(pem: key.publicKeyPEM))
        }
        self.keys = table
        self.now = now
    }

    /// Signature verifications performed so far (once per distinct token).
    public var signatureVerifications: Int { verifications.load(ordering: .relaxed) }

    /// What a check of one `authorization` header found.
    public enum Verdict: Sendable, Equatable {
        /// The token verified against the registered key with this id.
        case valid(keyID: String)
        /// The APNs reason to answer 403 with.
        case rejected(reason: String)
    }

    /// The APNs reason to reject `authorization` with, or nil when it is valid.
    public func rejection(authorization: String?) -> String? {
        switch verdict(authorization: authorization) {
        case .valid: nil
        case .rejected(let reason): reason
        }
    }

    /// Checks `authorization`; a valid token names the key it verified
    /// against, so a caller can decide what that key may do.
    public func verdict(authorization: String?) -> Verdict {
        guard let authorization, !authorization.isEmpty else { return .rejected(reason: "MissingProviderToken") }
        let decoded: Decoded
        if let last = cache.withLock({ $0.last }), last.authorization == authorization {
            decoded = last.decoded
        } else {
            guard let token = Self.bearerToken(authorization) else { return .rejected(reason: "InvalidProviderToken") }
            // Decoding under the lock makes "verified once per distinct token"
            // exact even when many connections present a new token at once; it
            // costs one signature check per new token, about 100 µs.
            decoded = cache.withLock { cache -> Decoded in
                let entry: Decoded
                if let cached = cache.byToken[token] {
                    entry = cached
                } else {
                    entry = decode(token)
                    if cache.byToken.count > 10_000 { cache.byToken.removeAll() }  // bound memory under token churn
                    cache.byToken[token] = entry
                }
                cache.last = (authorization, entry)
                return entry
            }
        }
        if let rejection = decoded.rejection { return .rejected(reason: rejection) }
        let age = now() - decoded.issuedAt
        if age > Self.maximumAgeSeconds { return .rejected(reason: "ExpiredProviderToken") }
        if age < -Self.futureSkewSeconds { return .rejected(reason: "InvalidProviderToken") }
        return .valid(keyID: decoded.keyID)
    }

    /// What follows a `bearer ` prefix in any case, or nil without one.
    /// An ASCII header (every JWT) is compared byte by byte, where lowercasing
    /// and characters are bytes; anything else lowercases the whole value and
    /// compares characters, as APNs' rule was always read here.
    public static func bearerToken(_ authorization: String) -> String? {
        let prefix = "bearer "
        let utf8 = authorization.utf8
        guard authorization.allUTF8Bytes(satisfy: { $0 < 0x80 }) else {
            guard authorization.lowercased().hasPrefix(prefix) else { return nil }
            return String(authorization.dropFirst(prefix.count))
        }
        guard utf8.count >= prefix.utf8.count else { return nil }
        let lowered = utf8.lazy.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 + 32 : $0 }
        guard lowered.starts(with: prefix.utf8) else { return nil }
        return String(authorization[utf8.index(utf8.startIndex, offsetBy: prefix.utf8.count)...])
    }

    private func decode(_ token: String) -> Decoded {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        let invalid = Decoded(keyID: "", issuedAt: 0, rejection: "InvalidProviderToken")
        guard parts.count == 3,
              let headerBytes = Base64URL.decode(parts[0]), let claimsBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]),
              let header = try? JSONParser.parse(headerBytes), let claims = try? JSONParser.parse(claimsBytes),
              header["alg"]?.stringValue == "ES256",
              let keyID = header["kid"]?.stringValue,
              let issuer = claims["iss"]?.stringValue,
              let issuedAt = claims["iat"]?.integerValue
        else { return invalid }
        guard let registered = keys[keyID] else {
            return Decoded(keyID: keyID, issuedAt: issuedAt, rejection: "InvalidProviderToken")
        }
        guard registered.teamID == issuer else {
            return Decoded(keyID: keyID, issuedAt: issuedAt, rejection: "InvalidProviderToken")
        }
        verifications.add(1, ordering: .relaxed)
        let signingInput = Array((parts[0] + "." + parts[1]).utf8)
        guard registered.key.verify(signature: signature, message: signingInput) else {
            return Decoded(keyID: keyID, issuedAt: issuedAt, rejection: "InvalidProviderToken")
        }
        return Decoded(keyID: keyID, issuedAt: issuedAt, rejection: nil)
    }
}

/// Base64url without padding, as JWS uses it.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let values: [UInt8: UInt8] = Dictionary(
        uniqueKeysWithValues: alphabet.enumerated().map { ($1, UInt8($0)) })

    public static func decode(_ text: String) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in text.utf8 {
            guard let value = values[byte] else { return nil }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8((buffer >> UInt32(bits)) & 0xFF))
            }
        }
        // A lone 6-bit remainder cannot come from whole bytes.
        if bits >= 6 { return nil }
        return output
    }

    public static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        var index = 0
        while index + 3 <= bytes.count {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            output += [18, 12, 6, 0].map { alphabet[Int((chunk >> UInt32($0)) & 63)] }
            index += 3
        }
        let remaining = bytes.count - index
        if remaining == 1 {
            let chunk = UInt32(bytes[index]) << 16
            output += [18, 12].map { alphabet[Int((chunk >> UInt32($0)) & 63)] }
        } else if remaining == 2 {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            output += [18, 12, 6].map { alphabet[Int((chunk >> UInt32($0)) & 63)] }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
