import APNs
import Foundation
import Testing

@Suite("ES256 checked by implementations nobody here wrote")
struct IndependentVerificationTests {
    static func isBase64URL(_ character: Character) -> Bool {
        character.isASCII && (character.isLetter || character.isNumber || character == "-" || character == "_")
    }

    @Test("python3 with cryptography, and openssl, are installed")
    func toolsPresent() throws {
        try ReferenceTools.require()
    }

    @Test("openssl genpkey makes the PKCS#8 PEM Apple ships as .p8")
    func testKeysArePKCS8() throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let pem = try String(contentsOfFile: keys.p256(), encoding: .utf8)
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        #expect(pem.hasSuffix("-----END PRIVATE KEY-----\n"))
    }

    @Test("a minted JWT: exact header and claims bytes, verified by Python and by openssl dgst")
    func jwtVerifies() throws {
        try ReferenceTools.require()
        let keys = try KeyFiles()
        defer { keys.remove() }
        let credentials = try ProviderCredentials(keyID: "KEY0123456", teamID: "TEAMABCDEF", keyPath: keys.p256())
        for issuedAt: Int64 in [0, 1_700_000_000, 4_102_444_800] {
            let token = ProviderToken(credentials: credentials, issuedAt: issuedAt)
            let header = token.authorizationHeaderValue
            try #require(header.hasPrefix("bearer "), "the authorization value is 'bearer <JWT>'")
            let jwt = String(header.dropFirst("bearer ".count))
            let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
            #expect(parts.count == 3)
            #expect(parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(Self.isBase64URL) }, "unpadded base64url: \(jwt)")

            // Python decodes and verifies (ProviderTokenTests' verifier); the bytes must be exact.
            let decoded = try verifyWithPython(jwt: jwt, publicKeyPEM: credentials.key.publicKeyPEM)
            #expect(decoded == #"{"alg":"ES256","kid":"KEY0123456"}"# + "\n" + #"{"iss":"TEAMABCDEF","iat":\#(issuedAt)}"# + "\n")
            #expect(token.keyID == "KEY0123456" && token.teamID == "TEAMABCDEF" && token.issuedAt == issuedAt)

            let (status, output) = try ReferenceTools.opensslVerify(jwt, publicKeyPEM: credentials.key.publicKeyPEM, in: keys)
            #expect(status == 0 && output.contains("Verified OK"), "openssl dgst: \(output)")
        }
    }

    @Test("openssl dgst rejects a JWT checked against another key (the check can fail)")
    func opensslCanFail() throws {
        try ReferenceTools.require()
        let keys = try KeyFiles()
        defer { keys.remove() }
        let credentials = try ProviderCredentials(keyID: "KEY0123456", teamID: "TEAMABCDEF", keyPath: keys.p256())
        let jwt = String(ProviderToken(credentials: credentials, issuedAt: 1_700_000_000).authorizationHeaderValue.dropFirst(7))
        let other = try SigningKey(contentsOfFile: keys.p256("other.p8"))
        let (status, output) = try ReferenceTools.opensslVerify(jwt, publicKeyPEM: other.publicKeyPEM, in: keys)
        #expect(status != 0 && output.contains("Verification failure"), "openssl dgst: \(output)")
    }

    @Test("512 raw signatures are 64-byte R‖S that Python verifies, short R or S included")
    func manySignatures() throws {
        try ReferenceTools.require()
        let keys = try KeyFiles()
        defer { keys.remove() }
        let key = try SigningKey(contentsOfFile: keys.p256())
        // About 1 signature in 128 has an R or S below 2^248: without the
        // left padding to 32 bytes those would come out short or shifted.
        let pairs = (0..<512).map { index -> (message: [UInt8], signature: [UInt8]) in
            let message = Array("message \(index)".utf8)
            return (message, key.sign(message))
        }
        #expect(pairs.allSatisfy { $0.signature.count == 64 })
        #expect(try ReferenceTools.failingSignatures(pairs, publicKeyPEM: key.publicKeyPEM) == [])
        // The same list with one signature swapped is caught, so the batch check can fail.
        var tampered = pairs
        tampered[7].signature = pairs[8].signature
        #expect(try ReferenceTools.failingSignatures(tampered, publicKeyPEM: key.publicKeyPEM) == [7])
    }

    @Test("a key given as PEM bytes (from a secret store) signs what its public key verifies")
    func keyFromPEMBytes() throws {
        try ReferenceTools.require()
        let keys = try KeyFiles()
        defer { keys.remove() }
        let path = try keys.p256()
        let pem = try #require(FileManager.default.contents(atPath: path))
        let fromBytes = try SigningKey(pem: Array(pem), field: "APNS_AUTH_KEY")
        let fromFile = try SigningKey(contentsOfFile: path)
        #expect(fromBytes.fingerprint == fromFile.fingerprint)
        #expect(fromBytes.publicKeyPEM == fromFile.publicKeyPEM)

        // The public PEM is what openssl derives from the private key.
        let derived = try KeyFiles.run(["openssl", "pkey", "-in", path, "-pubout"])
        #expect(fromBytes.publicKeyPEM == derived)

        let credentials = try ProviderCredentials(keyID: "KEY0123456", teamID: "TEAMABCDEF", key: fromBytes)
        let jwt = String(ProviderToken(credentials: credentials, issuedAt: 1_763_800_000).authorizationHeaderValue.dropFirst(7))
        _ = try verifyWithPython(jwt: jwt, publicKeyPEM: fromFile.publicKeyPEM)
    }

    @Test("the fingerprint is the first 12 hex digits of SHA-256 over the public key DER")
    func fingerprint() throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let path = try keys.p256()
        let key = try SigningKey(contentsOfFile: path)
        let digest = try KeyFiles.run(["sh", "-c", "openssl pkey -in '\(path)' -pubout -outform DER | openssl dgst -sha256 -r"])
        #expect(key.fingerprint == String(digest.prefix(12)))
        #expect(key.fingerprint.allSatisfy { $0.isHexDigit && !$0.isUppercase })
    }
}
