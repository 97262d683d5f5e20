@testable import Ingress
import Testing

/// The keyring on its own: the bearer token's parsing, and the keys it
/// remembers after a first verification (compared, never hashed again).
@Suite("API keyring")
struct APIKeyringTests {
    static func keyring() -> APIKeyring {
        APIKeyring(keys: [
            APIKey(name: "a", sha256Hex: IngressStepsTests.sha256Hex("secret-a"), apps: nil)!,
            APIKey(name: "b", sha256Hex: IngressStepsTests.sha256Hex("secret-b"), apps: nil)!,
        ])
    }

    @Test("Bearer in any case, spaces and tabs around scheme and key; anything else is no key",
          arguments: [
            ("Bearer secret-a", "a"), ("bearer secret-a", "a"), ("BEARER secret-a", "a"), (" \tBearer \t secret-a \t", "a"),
            ("Bearer secret-b", "b"), ("Bearer  secret-b", "b"),
            ("Bearer secret-a ", "a"), ("Basic secret-a", nil), ("Bearer", nil), ("Bearer ", nil), ("Bearer \t ", nil),
            ("Bearersecret-a", nil), ("Bearer secret-c", nil), ("Bearer secret-", nil), ("Bearer secret-aa", nil), ("", nil),
            ("Bearer sécret-a", nil), ("Bëarer secret-a", nil),
          ] as [(String, String?)])
    func parsing(_ header: String, _ name: String?) {
        let keyring = Self.keyring()
        // Twice: the first time verifies by hash, the second by the remembered key.
        #expect(keyring.authenticate(authorization: header)?.name == name)
        #expect(keyring.authenticate(authorization: header)?.name == name)
    }

    @Test("a verified key is remembered once; a wrong key, a prefix or an extension of a remembered one is never accepted nor remembered")
    func remembered() {
        let keyring = Self.keyring()
        #expect(keyring.rememberedKeys == 0)
        #expect(keyring.authenticate(authorization: "Bearer secret-c") == nil)
        #expect(keyring.rememberedKeys == 0, "an unknown key is not remembered")
        for _ in 0..<3 { #expect(keyring.authenticate(authorization: "Bearer secret-a")?.name == "a") }
        #expect(keyring.rememberedKeys == 1)
        for wrong in ["secret-", "secret-aa", "secret-b\u{0}", "Secret-a", "secret-A", "s", "secret-a-and-more"] {
            #expect(keyring.authenticate(authorization: "Bearer \(wrong)") == nil, "\(wrong)")
        }
        #expect(keyring.rememberedKeys == 1)
        #expect(keyring.authenticate(authorization: "Bearer secret-b")?.name == "b")
        #expect(keyring.authenticate(authorization: "bearer secret-b")?.name == "b")
        #expect(keyring.rememberedKeys == 2)
        #expect(keyring.authenticate(authorization: nil) == nil)
    }
}
