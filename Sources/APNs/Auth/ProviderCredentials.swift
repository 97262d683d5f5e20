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
        // All three are checked before the key file is touched, so a missing
        // id is reported as such rather than hidden behind a file error.
        let keyID = try Self.require(keyID, field: "keyId", needed: "to sign provider tokens (the kid header)")
        let teamID = try Self.require(teamID, field: "teamId", needed: "to sign provider tokens (the iss claim)")
        let keyPath = try Self.require(keyPath, field: "keyPath", needed: "to sign provider tokens (the .p8 file)")
        try self.init(keyID: keyID, teamID: teamID, key: SigningKey(contentsOfFile: keyPath))
    }

    /// Checks that an app's bundle id is configured at all: MS028 at
    /// start-up, rather than a MissingTopic (MS035) on every send.
    ///
    /// Its shape (bare, no push-type suffix) is ``Preflight/checkBundleID(_:)``'s job.
    public static func checkBundleID(_ bundleID: String?) throws(CredentialError) {
        _ = try require(bundleID, field: "bundleId", needed: "to address pushes (it becomes apns-topic)")
    }

    static func require(_ value: String?, field: String, needed purpose: String) throws(CredentialError) -> String {
        guard let value, !value.isEmpty else { throw CredentialError.missing(field, needed: purpose) }
        return value
    }

    static func checkIdentifier(_ value: String, field: String) throws(CredentialError) {
        if value.isEmpty {
            throw CredentialError.missing(field, needed: "to sign provider tokens")
        }
        guard value.utf8.count == 10, value.utf8.allSatisfy(\.isASCIIAlphanumeric) else {
            // The count, not the value: a pasted secret in the wrong field must not reach a log.
            throw CredentialError(
                .malformedIdentifier, field: field,
                message: "\(field) must be the 10-character identifier from the developer portal "
                    + "(letters and digits only; got \(value.count) characters\(Self.describeOddCharacters(value)))")
        }
    }

    private static func describeOddCharacters(_ value: String) -> String {
        let odd = value.filter { !($0.isASCII && ($0.isLetter || $0.isNumber)) }.count
        return odd == 0 ? "" : ", \(odd) of them not a letter or digit"
    }
}
