import APNs

/// API keys anyone could guess, known by their SHA-256.
///
/// The configuration holds only hashes, so a short or guessable key cannot
/// be spotted by its length; what can be spotted is the hash of a word on
/// every wordlist (`password`, `changeme`, …), of the empty string (what
/// `printf %s "$KEY" | sha256sum` gives when `KEY` is unset), of the same
/// with the newline `echo` adds, and of keys once published in this
/// repository's examples. The relay refuses to load any of them.
public enum WeakAPIKeys {
    /// Words (and former example keys) whose hashes are refused.
    public static let words = [
        "", "password", "passw0rd", "secret", "changeme", "change-me", "change_me", "test", "testing", "admin", "root",
        "123456", "12345678", "123456789", "1234567890", "qwerty", "letmein", "default", "example", "demo", "key", "apikey",
        "api-key", "api_key", "token", "relay", "apns", "apns-relay", "apnsrelay", "apns_relay",
        "compose-backend-key-change-me", "compose-admin-key-change-me",
    ]

    /// Hash → the word it is the hash of, for each spelling an operator might type.
    private static let hashes: [String: String] = {
        var table: [String: String] = [:]
        for word in words {
            let spellings = [word, word.uppercased(), word.prefix(1).uppercased() + word.dropFirst()]
            for spelling in Set(spellings) {
                for text in [spelling, spelling + "\n"] {
                    table[Fingerprint.sha256Hex(Array(text.utf8))] = spelling
                }
            }
        }
        return table
    }()

    /// The guessable key `sha256Hex` is the hash of, or nil when it is none of them.
    public static func preimage(ofSHA256Hex sha256Hex: String) -> String? {
        hashes[sha256Hex.lowercased()]
    }
}
