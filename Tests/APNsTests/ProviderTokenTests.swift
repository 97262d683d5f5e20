import APNs
import Foundation
import Synchronization
import Testing

/// Verifies a JWT with Python's `cryptography` package, an implementation
/// nobody on this project wrote. Prints the header and claims JSON on success.
func verifyWithPython(jwt: String, publicKeyPEM: String) throws -> String {
    let (status, output) = try runVerifier(jwt: jwt, publicKeyPEM: publicKeyPEM)
    try #require(status == 0, "verification failed: \(output)")
    return output
}

func runVerifier(jwt: String, publicKeyPEM: String) throws -> (Int32, String) {
    let script = #"""
    import sys, base64, json
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, utils
    from cryptography.exceptions import InvalidSignature
    token, pem = sys.argv[1], sys.stdin.read().encode()
    head, claims, signature = token.split(".")
    pad = lambda part: base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    raw = pad(signature)
    assert len(raw) == 64, "signature is not 64 bytes"
    der = utils.encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    key = serialization.load_pem_public_key(pem)
    assert isinstance(key.curve, ec.SECP256R1)
    try:
        key.verify(der, f"{head}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        sys.exit("signature does not verify")
    print(pad(head).decode())
    print(pad(claims).decode())
    """#
    return try KeyFiles.runReturningStatus(["python3", "-c", script, jwt], input: Data(publicKeyPEM.utf8))
}

@Suite("Provider tokens (ES256 JWT)")
struct ProviderTokenTests {
    @Test("a minted JWT verifies with Python's cryptography, header and claims exact")
    func verifiesIndependently() throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let credentials = try ProviderCredentials(keyID: "ABC123DEFG", teamID: "TEAM123456", keyPath: keys.p256())
        for issuedAt: Int64 in [1_700_000_000, 1_763_800_123] {
            let token = ProviderToken(credentials: credentials, issuedAt: issuedAt)
            let jwt = String(token.authorizationHeaderValue.dropFirst("bearer ".count))
            let decoded = try verifyWithPython(jwt: jwt, publicKeyPEM: credentials.key.publicKeyPEM)
            #expect(decoded == "{\"alg\":\"ES256\",\"kid\":\"ABC123DEFG\"}\n{\"iss\":\"TEAM123456\",\"iat\":\(issuedAt)}\n")
        }
    }

    @Test("a tampered JWT does not verify (the check can fail)")
    func tamperedFails() throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let credentials = try ProviderCredentials(keyID: "ABC123DEFG", teamID: "TEAM123456", keyPath: keys.p256())
        let jwt = String(ProviderToken(credentials: credentials, issuedAt: 1_700_000_000).authorizationHeaderValue.dropFirst(7))
        #expect(try runVerifier(jwt: jwt, publicKeyPEM: credentials.key.publicKeyPEM).0 == 0)
        let other = try SigningKey(contentsOfFile: keys.p256("other.p8"))
        #expect(try runVerifier(jwt: jwt, publicKeyPEM: other.publicKeyPEM).0 != 0)
        // Flip a character well inside the signature (every bit there is signature data).
        var characters = Array(jwt)
        let middle = characters.count - 20
        characters[middle] = characters[middle] == "A" ? "B" : "A"
        #expect(try runVerifier(jwt: String(characters), publicKeyPEM: credentials.key.publicKeyPEM).0 != 0)
    }

    @Test("tokens never print their value")
    func redacted() throws {
        let keys = try KeyFiles()
        defer { keys.remove() }
        let credentials = try ProviderCredentials(keyID: "ABC123DEFG", teamID: "TEAM123456", keyPath: keys.p256())
        let token = ProviderToken(credentials: credentials, issuedAt: 1_700_000_000)
        let jwt = String(token.authorizationHeaderValue.dropFirst(7))
        for text in ["\(token)", String(reflecting: token), token.description] {
            #expect(!text.contains(jwt))
            #expect(!text.contains(jwt.split(separator: ".")[2]))
        }
    }
}

/// A settable clock for cache tests.
final class TestClock: Sendable {
    private let seconds = Mutex<Int64>(1_700_000_000)
    var now: Int64 { seconds.withLock { $0 } }
    func advance(_ by: Int64) { seconds.withLock { $0 += by } }
}

@Suite("Provider token cache")
struct ProviderTokenCacheTests {
    func makeCache(_ clock: TestClock) throws -> (ProviderTokenCache, KeyFiles) {
        let keys = try KeyFiles()
        let credentials = try ProviderCredentials(keyID: "ABC123DEFG", teamID: "TEAM123456", keyPath: keys.p256())
        return (ProviderTokenCache(credentials: credentials, now: { clock.now }), keys)
    }

    @Test("mints once, reuses until 50 minutes, then re-mints")
    func refreshAtFifty() throws {
        let clock = TestClock()
        let (cache, keys) = try makeCache(clock)
        defer { keys.remove() }
        let first = cache.current()
        #expect(cache.mintCount == 1)
        clock.advance(49 * 60 + 59)
        #expect(cache.current() == first)
        #expect(cache.currentTokenAgeSeconds == Int64(49 * 60 + 59))
        clock.advance(1)
        let second = cache.current()
        #expect(second != first)
        #expect(second.issuedAt == first.issuedAt + 50 * 60)
        #expect(cache.mintCount == 2)
    }

    @Test("invalidation re-mints at once; a stale token's invalidation does nothing")
    func invalidation() throws {
        let clock = TestClock()
        let (cache, keys) = try makeCache(clock)
        defer { keys.remove() }
        let first = cache.current()
        clock.advance(5 * 60)
        cache.invalidate(rejected: first)
        let second = cache.current()
        #expect(second != first)
        #expect(cache.mintCount == 2)
        cache.invalidate(rejected: first)  // already replaced
        #expect(cache.current() == second)
        #expect(cache.mintCount == 2)
        clock.advance(19 * 60)
        #expect(cache.current() == second)
    }

    @Test("200 concurrent callers on a cold cache get one token from one mint")
    func concurrentFirstUse() async throws {
        let clock = TestClock()
        let (cache, keys) = try makeCache(clock)
        defer { keys.remove() }
        let tokens = await withTaskGroup(of: ProviderToken.self) { group in
            for _ in 0..<200 { group.addTask { cache.current() } }
            var collected = Set<ProviderToken>()
            for await token in group { collected.insert(token) }
            return collected
        }
        #expect(tokens.count == 1)
        #expect(cache.mintCount == 1)
    }

    @Test("a burst of rejections of one token causes one re-mint")
    func burstOfRejections() async throws {
        let clock = TestClock()
        let (cache, keys) = try makeCache(clock)
        defer { keys.remove() }
        let rejected = cache.current()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    cache.invalidate(rejected: rejected)
                    _ = cache.current()
                }
            }
        }
        #expect(cache.mintCount == 2)
    }
}
