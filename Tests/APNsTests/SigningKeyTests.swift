import APNs
import Foundation
import Testing

@Suite("Signing keys and credentials")
struct SigningKeyTests {
    @Test("a P-256 PKCS#8 .p8 with mode 0600 loads; it prints only a fingerprint")
    func loads() throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let path = try keys.p256()
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let key = try SigningKey(contentsOfFile: path)
        #expect(key.fingerprint.count == 12)
        #expect(key.publicKeyPEM.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        #expect(!key.description.contains("PRIVATE"))
        let body = pem.split(separator: "\n")[1]
        #expect(!"\(key)".contains(body))
        // The fingerprint is SHA-256 of the public key's DER, as openssl computes it.
        let der = try KeyFiles.run(["sh", "-c", "openssl pkey -in '\(path)' -pubout -outform DER | sha256sum"])
        #expect(der.hasPrefix(key.fingerprint))
    }

    @Test(
        "unusable key files give a clear error naming the field",
        arguments: [
            ("rsa", "KeyNotP256", "RSA"), ("p384", "KeyNotP256", "secp384r1"), ("garbage", "KeyNotPKCS8", "PKCS#8"),
            ("open", "KeyFileTooOpen", "chmod 600"), ("directory", "KeyFileUnreadable", "regular file"),
            ("missing", "KeyFileMissing", "does not exist"), ("sec1", "KeyNotPKCS8", "EC PRIVATE KEY"),
            ("encrypted", "KeyNotPKCS8", "encrypted"),
        ]
    )
    func rejects(kind: String, code: String, hint: String) throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let path: String
        switch kind {
        case "rsa": path = try keys.generate("rsa.p8", options: ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
        case "p384": path = try keys.generate("p384.p8", options: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"])
        case "garbage": path = try keys.write("garbage.p8", "-----BEGIN PRIVATE KEY-----\nnot base64 at all\n-----END PRIVATE KEY-----\n")
        case "open": path = try keys.p256("open.p8", mode: 0o644)
        case "directory":
            path = keys.path("dir.p8")
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        case "missing": path = keys.path("nope.p8")
        case "sec1":
            let pkcs8 = try keys.p256("for-sec1.p8")
            path = keys.path("sec1.pem")
            try KeyFiles.run(["openssl", "ec", "-in", pkcs8, "-out", path])
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        default:
            let pkcs8 = try keys.p256("for-encrypted.p8")
            path = keys.path("encrypted.p8")
            try KeyFiles.run(["openssl", "pkcs8", "-topk8", "-in", pkcs8, "-out", path, "-passout", "pass:secret"])
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        }
        do {
            _ = try SigningKey(contentsOfFile: path)
            Issue.record("\(kind) was accepted")
        } catch {
            #expect(error.code.rawValue == code)
            #expect(error.field == "keyPath")
            #expect(error.message.contains(hint), "\(error.message)")
            #expect(!error.message.contains("MII"), "no key material in messages")
        }
    }

    @Test("credentials: missing values are MS028, identifiers must be 10 letters or digits")
    func credentials() throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let path = try keys.p256()
        #expect(throws: Never.self) { try ProviderCredentials(keyID: "ABC123DEFG", teamID: "TEAM123456", keyPath: path) }
        for (keyID, teamID, keyPath, field) in [(nil, "TEAM123456", path, "keyId"), ("ABC123DEFG", "", path, "teamId"), ("ABC123DEFG", "TEAM123456", nil, "keyPath")] {
            do {
                _ = try ProviderCredentials(keyID: keyID, teamID: teamID, keyPath: keyPath)
                Issue.record("accepted missing \(field)")
            } catch {
                #expect(error.field == field)
                #expect(error.trapID == .missingConfiguration)
            }
        }
        do {
            _ = try ProviderCredentials(keyID: "ABC123DEF", teamID: "TEAM123456", keyPath: path)
            Issue.record("accepted a 9-character key id")
        } catch {
            #expect(error.code == .malformedIdentifier)
            #expect(error.message.hasPrefix("keyId"))
        }
    }
}
