internal import COpenSSL

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

    var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
