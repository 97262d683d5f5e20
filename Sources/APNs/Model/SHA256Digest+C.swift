internal import COpenSSL
import RelayBasics

/// A SHA-256 digest computed with OpenSSL.
struct SHA256Digest: Sendable, Hashable {
    let bytes: [UInt8]

    static func hash(_ data: [UInt8]) -> SHA256Digest {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        data.withUnsafeBufferPointer { input in
            digest.withUnsafeMutableBufferPointer { output in
                _ = SHA256(input.baseAddress, input.count, output.baseAddress)
            }
        }
        return SHA256Digest(bytes: digest)
    }

    var hexString: String { Hex.encode(bytes) }
}
