import RelayBasics

/// A device, push-to-start or per-activity token: the hex string APNs puts in
/// `/3/device/<token>`.
///
/// Tokens are credentials of a sort (anyone holding one and a key can push to
/// the device), so logs, traces and metrics only ever see ``fingerprint``.
public struct DeviceToken: Sendable, Hashable, CustomStringConvertible {
    /// Shortest token accepted, in hex digits (16 bytes).
    public static let minimumHexLength = 32
    /// Longest token accepted, in hex digits (APNs tokens are at most 100 bytes).
    public static let maximumHexLength = 200

    /// The token exactly as the device reported it.
    public let hex: String

    /// Validates the token's form: lowercase hexadecimal digits only, an even count,
    /// between ``minimumHexLength`` and ``maximumHexLength``.
    public init(_ hex: String) throws(APNsError) {
        if let rule = Self.brokenRule(hex) {
            throw APNsError.preflight(.badDeviceToken, field: "token", rule: rule)
        }
        self.hex = hex
    }

    /// Why `hex` is not a token, or nil when it is one.
    public static func brokenRule(_ hex: String) -> String? {
        let utf8 = hex.utf8
        if utf8.isEmpty { return "must not be empty" }
        // Lowercase only: APNs hands tokens out as lowercase hex, and the
        // relay keys dead tokens and fingerprints by the exact text, so an
        // uppercase copy of a token would be a second, unknown token.
        if let bad = utf8.first(where: { !Hex.isDigit($0) || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains($0) }) {
            if (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(bad) {
                return "must contain only lowercase hexadecimal digits (found '\(Character(Unicode.Scalar(bad)))'); APNs tokens are lowercase hex"
            }
            let shown = bad >= 0x20 && bad < 0x7F ? "'\(Character(Unicode.Scalar(bad)))'" : "byte 0x\(String(bad, radix: 16))"
            return "must contain only hexadecimal digits (found \(shown))"
        }
        if utf8.count % 2 != 0 { return "must have an even number of hex digits (has \(utf8.count))" }
        if utf8.count < minimumHexLength || utf8.count > maximumHexLength {
            return "must be \(minimumHexLength)–\(maximumHexLength) hex digits long (has \(utf8.count))"
        }
        return nil
    }

    /// First 12 hex digits of the SHA-256 of the token: stable, safe to log.
    public var fingerprint: String { Fingerprint.of(hex) }

    /// The fingerprint: a token never prints itself.
    public var description: String { "token:\(fingerprint)" }
}

/// Short SHA-256 fingerprints for values that must not appear in telemetry.
public enum Fingerprint {
    /// Hex digits kept from the digest.
    public static let length = 12

    /// The first ``length`` hex digits of SHA-256(`text`'s UTF-8).
    public static func of(_ text: String) -> String {
        // Only the bytes whose digits are kept are encoded (two digits a byte).
        Hex.encode(SHA256Digest.hash(Array(text.utf8)).bytes.prefix(length / 2))
    }

    /// The SHA-256 of `bytes`, 32 bytes (API key checks compare these).
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        SHA256Digest.hash(bytes).bytes
    }

    /// The full SHA-256 of `bytes` as 64 lowercase hex digits (API key hashes).
    public static func sha256Hex(_ bytes: [UInt8]) -> String {
        SHA256Digest.hash(bytes).hexString
    }
}
