import APNs
import Foundation
import Testing

/// Expects `body` to throw a ``CredentialError`` with `code` about `field`,
/// whose message names the field and contains every one of `hints`.
func expectCredentialError(
    _ code: CredentialError.Code, field: String, hints: [String] = [], trap: TrapID? = nil, secrets: [String] = [],
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) {
    do {
        try body()
        Issue.record("accepted; expected \(code) for \(field)", sourceLocation: sourceLocation)
    } catch let error as CredentialError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(error.field == field, sourceLocation: sourceLocation)
        #expect(error.message.contains(field), "the message names the field: \(error.message)", sourceLocation: sourceLocation)
        for hint in hints {
            #expect(error.message.contains(hint), "\(error.message) lacks \(hint)", sourceLocation: sourceLocation)
        }
        #expect(error.trapID == trap, sourceLocation: sourceLocation)
        for secret in secrets {
            #expect(!error.message.contains(secret) && !error.description.contains(secret), "key material in \(error)", sourceLocation: sourceLocation)
        }
    } catch {
        Issue.record("threw \(type(of: error)), not CredentialError: \(error)", sourceLocation: sourceLocation)
    }
}

/// The base64 lines of a PEM file: what must never appear in a message or log.
func pemBody(_ pem: String) -> [String] {
    pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
}

@Suite("Credential errors name the field and the rule")
struct CredentialErrorTests {
    @Test("missing key id, team id, key path or bundle id is MS028", arguments: [nil, ""] as [String?])
    func missingSettings(value: String?) throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let path = try keys.p256()
        let trap = TrapID.missingConfiguration
        #expect(trap.rawValue == "MS028")
        expectCredentialError(.missing, field: "keyId", hints: ["required"], trap: trap) {
            _ = try ProviderCredentials(keyID: value, teamID: "TEAM123456", keyPath: path)
        }
        expectCredentialError(.missing, field: "teamId", hints: ["required"], trap: trap) {
            _ = try ProviderCredentials(keyID: "KEY1234567", teamID: value, keyPath: path)
        }
        expectCredentialError(.missing, field: "keyPath", hints: ["required"], trap: trap) {
            _ = try ProviderCredentials(keyID: "KEY1234567", teamID: "TEAM123456", keyPath: value)
        }
        expectCredentialError(.missing, field: "bundleId", hints: ["required", "apns-topic"], trap: trap) {
            try ProviderCredentials.checkBundleID(value)
        }
        #expect(throws: Never.self) { try ProviderCredentials.checkBundleID("com.example.shop") }
    }

    @Test("a missing id is reported before a bad key file is touched")
    func missingBeforeFile() {
        expectCredentialError(.missing, field: "teamId", trap: .missingConfiguration) {
            _ = try ProviderCredentials(keyID: "KEY1234567", teamID: nil, keyPath: "/nonexistent/AuthKey.p8")
        }
    }

    @Test(
        "key id and team id must be 10 letters or digits",
        arguments: ["KEY123456", "KEY12345678", "KEY-123456", "KEY 123456", "KÉY1234567", "key123456!"])
    func malformedIdentifiers(bad: String) throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let key = try SigningKey(contentsOfFile: keys.p256())
        expectCredentialError(.malformedIdentifier, field: "keyId", hints: ["10-character", "letters and digits"]) {
            _ = try ProviderCredentials(keyID: bad, teamID: "TEAM123456", key: key)
        }
        expectCredentialError(.malformedIdentifier, field: "teamId", hints: ["10-character"]) {
            _ = try ProviderCredentials(keyID: "KEY1234567", teamID: bad, key: key)
        }
        let credentials = try ProviderCredentials(keyID: "abcDEF0123", teamID: "0123456789", key: key)
        #expect(credentials.keyID == "abcDEF0123")
    }

    @Test("a key file readable or writable by group or others is refused with its mode and the fix", arguments: [0o644, 0o640, 0o604, 0o620, 0o660])
    func tooOpen(mode: Int) throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let path = try keys.p256("open.p8", mode: mode)
        let shown = "0" + String(mode, radix: 8)
        expectCredentialError(.keyFileTooOpen, field: "keyPath", hints: [shown, "chmod 600", path]) {
            _ = try SigningKey(contentsOfFile: path)
        }
    }

    @Test("inside $CREDENTIALS_DIRECTORY (systemd LoadCredential) group bits pass, others bits do not")
    func systemdCredentials() throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let groupReadable = try keys.p256("cred.p8", mode: 0o440)
        let worldReadable = try keys.p256("open.p8", mode: 0o444)
        let directory = (groupReadable as NSString).deletingLastPathComponent
        // Only this test sets the variable, and only paths inside the directory are affected.
        setenv("CREDENTIALS_DIRECTORY", directory, 1)
        defer { unsetenv("CREDENTIALS_DIRECTORY") }
        #expect(try SigningKey(contentsOfFile: groupReadable).fingerprint.count == 12)
        expectCredentialError(.keyFileTooOpen, field: "keyPath", hints: ["0444"]) {
            _ = try SigningKey(contentsOfFile: worldReadable)
        }
    }

    @Test("owner-only modes load", arguments: [0o600, 0o400])
    func ownerOnly(mode: Int) throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let key = try SigningKey(contentsOfFile: keys.p256("ok.p8", mode: mode))
        #expect(key.fingerprint.count == 12)
    }

    @Test("a missing file, a path through a file, and a directory are each told apart")
    func fileShapes() throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        expectCredentialError(.keyFileMissing, field: "keyPath", hints: ["does not exist"]) {
            _ = try SigningKey(contentsOfFile: keys.path("AuthKey_MISSING.p8"))
        }
        let file = try keys.p256()
        expectCredentialError(.keyFileMissing, field: "keyPath", hints: ["does not exist"]) {
            _ = try SigningKey(contentsOfFile: file + "/AuthKey.p8")
        }
        let directory = keys.path("keys.d")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        expectCredentialError(.keyFileUnreadable, field: "keyPath", hints: ["is a directory"]) {
            _ = try SigningKey(contentsOfFile: directory)
        }
    }

    @Test("files that are not a PKCS#8 PEM private key are refused without echoing them")
    func notPKCS8() throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let p256 = try keys.p256()
        let privatePEM = try String(contentsOfFile: p256, encoding: .utf8)
        let publicPEM = try KeyFiles.run(["openssl", "pkey", "-in", p256, "-pubout"])
        let sec1 = keys.path("sec1.pem")
        try KeyFiles.run(["openssl", "ec", "-in", p256, "-out", sec1])
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: sec1)
        let sec1PEM = try String(contentsOfFile: sec1, encoding: .utf8)
        // A PKCS#8 armour around a truncated body: it looks right and is not.
        let truncated = "-----BEGIN PRIVATE KEY-----\n" + pemBody(privatePEM)[0] + "\n-----END PRIVATE KEY-----\n"
        let cases: [(name: String, text: String, hint: String, secrets: [String])] = [
            ("empty.p8", "", "PKCS#8", []),
            ("garbage.p8", "this is not a key at all\n", "PKCS#8", ["this is not a key"]),
            ("public.pem", publicPEM, "PKCS#8", pemBody(publicPEM)),
            ("sec1.p8", sec1PEM, "EC PRIVATE KEY", pemBody(sec1PEM)),
            ("truncated.p8", truncated, "PKCS#8", pemBody(truncated)),
        ]
        for item in cases {
            let path = try keys.write(item.name, item.text)
            expectCredentialError(.notPKCS8, field: "keyPath", hints: [item.hint], secrets: item.secrets) {
                _ = try SigningKey(contentsOfFile: path)
            }
            // The same bytes from a secret store name the setting they came from.
            expectCredentialError(.notPKCS8, field: "APNS_AUTH_KEY", hints: [item.hint], secrets: item.secrets) {
                _ = try SigningKey(pem: Array(item.text.utf8), field: "APNS_AUTH_KEY")
            }
        }
    }

    @Test(
        "keys that are not EC P-256 say what was found",
        arguments: [
            (["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"], "an RSA key"),
            (["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"], "secp384r1"),
            (["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:secp256k1"], "secp256k1"),
            (["-algorithm", "ED25519"], "an ED25519 key"),
        ])
    func wrongKeyType(options: [String], found: String) throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let path = try keys.generate("wrong.p8", options: options)
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        try #require(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"), "openssl genpkey writes PKCS#8")
        expectCredentialError(.wrongKeyType, field: "keyPath", hints: [found, "P-256"], secrets: pemBody(pem)) {
            _ = try SigningKey(contentsOfFile: path)
        }
    }

    @Test("codes are stable strings that alert rules and runbooks can key on")
    func stableCodes() {
        let codes: [CredentialError.Code] = [
            .missing, .malformedIdentifier, .keyFileMissing, .keyFileUnreadable, .keyFileTooOpen, .notPKCS8, .wrongKeyType,
        ]
        #expect(codes.map(\.rawValue) == [
            "MissingApnsConfig", "MalformedIdentifier", "KeyFileMissing", "KeyFileUnreadable", "KeyFileTooOpen", "KeyNotPKCS8",
            "KeyNotP256",
        ])
        let error = CredentialError(.missing, field: "keyId", message: "keyId is required", trapID: .missingConfiguration)
        #expect(error.description == "MissingApnsConfig: keyId is required [MS028]")
    }
}
