import Foundation
import Testing

/// The ES256 implementations the relay's signer is checked against: Python's
/// `cryptography` package and the `openssl` command line. Nobody on this
/// project wrote them, so a bug shared by signer and checker cannot hide.
enum ReferenceTools {
    /// Fails the test with what to install when a reference tool is absent,
    /// instead of a puzzling verification failure later.
    static func require() throws {
        let (python, pythonOutput) = try KeyFiles.runReturningStatus(["python3", "-c", "import cryptography; print(cryptography.__version__)"])
        try #require(
            python == 0,
            "python3 with the cryptography package is required to verify JWTs independently (apt-get install python3-cryptography): \(pythonOutput)")
        let (openssl, opensslOutput) = try KeyFiles.runReturningStatus(["openssl", "version"])
        try #require(openssl == 0, "the openssl command line is required to make test keys and verify signatures: \(opensslOutput)")
    }

    /// Verifies many raw signatures in one Python process; returns the
    /// indexes of those that fail.
    static func failingSignatures(_ pairs: [(message: [UInt8], signature: [UInt8])], publicKeyPEM: String) throws -> [Int] {
        let script = #"""
            import sys
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec, utils
            from cryptography.exceptions import InvalidSignature
            pem, *lines = sys.stdin.read().split("\n#\n")
            key = serialization.load_pem_public_key(pem.encode())
            bad = []
            for index, line in enumerate(l for l in lines if l.strip()):
                message, signature = (bytes.fromhex(x) for x in line.strip("\n").split(" "))
                if len(signature) != 64:
                    bad.append(index); continue
                der = utils.encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
                try: key.verify(der, message, ec.ECDSA(hashes.SHA256()))
                except InvalidSignature: bad.append(index)
            print(" ".join(map(str, bad)))
            """#
        let body = pairs.map { hex($0.message) + " " + hex($0.signature) }.joined(separator: "\n#\n")
        let (status, output) = try KeyFiles.runReturningStatus(["python3", "-c", script], input: Data((publicKeyPEM + "\n#\n" + body).utf8))
        try #require(status == 0, "the Python verifier failed: \(output)")
        return output.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
    }

    /// Verifies a JWT with `openssl dgst -sha256 -verify`, after `openssl
    /// asn1parse` has turned R‖S into the DER ECDSA-Sig-Value openssl expects.
    /// Returns openssl's exit status and output, so a failure can be asserted too.
    static func opensslVerify(_ jwt: String, publicKeyPEM: String, in keys: KeyFiles) throws -> (Int32, String) {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3, "a compact JWS has three parts")
        let signature = try #require(base64URLDecode(parts[2]), "the signature part is not base64url")
        try #require(signature.count == 64, "the signature is \(signature.count) bytes, not 64")
        let name = UUID().uuidString
        let config = try keys.write("\(name).asn1", """
            asn1=SEQUENCE:signature
            [signature]
            r=INTEGER:0x\(hex(Array(signature[0..<32])))
            s=INTEGER:0x\(hex(Array(signature[32..<64])))

            """)
        let der = keys.path("\(name).der")
        try KeyFiles.run(["openssl", "asn1parse", "-genconf", config, "-out", der, "-noout"])
        let input = try keys.write("\(name).input", parts[0] + "." + parts[1])
        let publicKey = try keys.write("\(name).pub.pem", publicKeyPEM)
        return try KeyFiles.runReturningStatus(["openssl", "dgst", "-sha256", "-verify", publicKey, "-signature", der, input])
    }

    static func base64URLDecode(_ text: String) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        return Data(base64Encoded: standard).map { Array($0) }
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
