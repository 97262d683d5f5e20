import RelayJSON

/// A signed provider token (JWT, ES256): header `{"alg":"ES256","kid":…}`,
/// claims `{"iss":…,"iat":…}`.
///
/// It authenticates every push of a team for up to an hour, so it is a
/// secret: `description`, `debugDescription` and its mirror are redacted, and
/// the value leaves the type only through ``authorizationHeaderValue``.
public struct ProviderToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let keyID: String
    public let teamID: String
    /// Unix seconds.
    public let issuedAt: Int64
    /// `bearer <JWT>`, made once: every push of the next hour sends it.
    private let bearer: String

    /// Signs a token for `credentials` issued at `issuedAt` (unix seconds).
    public init(credentials: ProviderCredentials, issuedAt: Int64) {
        keyID = credentials.keyID
        teamID = credentials.teamID
        self.issuedAt = issuedAt
        let header: JSONValue = ["alg": "ES256", "kid": .string(credentials.keyID)]
        let claims: JSONValue = ["iss": .string(credentials.teamID), "iat": .integer(issuedAt)]
        let signingInput = Base64URL.encode(header.encoded()) + "." + Base64URL.encode(claims.encoded())
        let signature = credentials.key.sign(Array(signingInput.utf8))
        bearer = "bearer " + signingInput + "." + Base64URL.encode(signature)
    }

    /// `bearer <JWT>`, the `authorization` header APNs expects (the same
    /// string each time, not a concatenation per push).
    public var authorizationHeaderValue: String { bearer }

    public var description: String { "ProviderToken(kid: \(keyID), iss: \(teamID), iat: \(issuedAt), jwt: <redacted>)" }
    public var debugDescription: String { description }

    // Without this, dump() and debuggers walk the stored properties and print the JWT.
    public var customMirror: Mirror {
        Mirror(self, children: ["keyID": keyID, "teamID": teamID, "issuedAt": issuedAt, "jwt": "<redacted>"], displayStyle: .struct)
    }
}

/// Base64url without padding (RFC 7515 §2).
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let remaining = bytes.count - index
            let chunk = UInt32(bytes[index]) << 16
                | (remaining > 1 ? UInt32(bytes[index + 1]) << 8 : 0)
                | (remaining > 2 ? UInt32(bytes[index + 2]) : 0)
            let characters = remaining >= 3 ? 4 : remaining + 1
            for position in 0..<characters {
                output.append(alphabet[Int((chunk >> UInt32(18 - 6 * position)) & 63)])
            }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }
}
