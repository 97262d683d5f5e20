/// An app's APNs credentials are missing or unusable. Raised at start-up, so
/// a misconfigured app never reaches its first send.
public struct CredentialError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable identifier of what is wrong.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A required setting is absent or empty (MS028).
        public static let missing = Code(rawValue: "MissingApnsConfig")
        /// Key id or team id is not 10 letters and digits.
        public static let malformedIdentifier = Code(rawValue: "MalformedIdentifier")
        public static let keyFileMissing = Code(rawValue: "KeyFileMissing")
        public static let keyFileUnreadable = Code(rawValue: "KeyFileUnreadable")
        /// The key file can be read by group or others.
        public static let keyFileTooOpen = Code(rawValue: "KeyFileTooOpen")
        /// Not a PKCS#8 PEM private key.
        public static let notPKCS8 = Code(rawValue: "KeyNotPKCS8")
        /// Not an EC key on P-256 (ES256 needs P-256).
        public static let wrongKeyType = Code(rawValue: "KeyNotP256")
    }

    public var code: Code
    /// The configuration field at fault (`keyId`, `keyPath`…).
    public var field: String
    /// Names the field and the rule; never contains key material.
    public var message: String
    public var trapID: TrapID?

    public init(_ code: Code, field: String, message: String, trapID: TrapID? = nil) {
        self.code = code
        self.field = field
        self.message = message
        self.trapID = trapID
    }

    public var description: String { "\(code): \(message)" + (trapID.map { " [\($0)]" } ?? "") }

    /// A required setting is absent or empty: always MS028, so the alert for
    /// a half-configured app fires whichever setting was left out.
    static func missing(_ field: String, needed purpose: String) -> CredentialError {
        CredentialError(.missing, field: field, message: "\(field) is required \(purpose)", trapID: .missingConfiguration)
    }
}
