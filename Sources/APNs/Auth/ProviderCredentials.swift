/// The provider credentials of one app: who signs (team, key) and with what.
public struct ProviderCredentials: Sendable {
    public let keyID: String
    public let teamID: String
    public let key: SigningKey

    /// Checks key id and team id (10 letters or digits each) around an already loaded key.
    public init(keyID: String, teamID: String, key: SigningKey) throws(CredentialError) {
        try Self.checkIdentifier(keyID, field: "keyId")
        try Self.checkIdentifier(teamID, field: "teamId")
        self.keyID = keyID
        self.teamID = teamID
        self.key = key
    }

    /// Loads credentials from configuration values; every missing value is
    /// MS028, and the key file is checked before it is read.
    public init(keyID: String?, teamID: String?, keyPath: String?) throws(CredentialError) {
        for (name, value) in [("keyId", keyID), ("teamId", teamID), ("keyPath", keyPath)] where (value ?? "").isEmpty {
            throw CredentialError(.missing, field: name, message: "\(name) is required to sign provider tokens", trapID: .missingConfiguration)
        }
        try self.init(keyID: keyID!, teamID: teamID!, key: SigningKey(contentsOfFile: keyPath!))
    }

    static func checkIdentifier(_ value: String, field: String) throws(CredentialError) {
        if value.isEmpty {
            throw CredentialError(.missing, field: field, message: "\(field) is required to sign provider tokens", trapID: .missingConfiguration)
        }
        guard value.utf8.count == 10, value.utf8.allSatisfy(\.isASCIIAlphanumeric) else {
            throw CredentialError(
                .malformedIdentifier, field: field,
                message: "\(field) must be the 10-character identifier from the developer portal (letters and digits; got \(value.utf8.count) characters)")
        }
    }
}
