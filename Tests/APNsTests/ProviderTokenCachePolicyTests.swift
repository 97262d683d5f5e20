import APNs
import Foundation
import Synchronization
import Testing

/// What the cache's mint observer was told, in order.
final class MintLog: Sendable {
    private let issuedAts = Mutex<[Int64]>([])
    func record(_ issuedAt: Int64) { issuedAts.withLock { $0.append(issuedAt) } }
    var all: [Int64] { issuedAts.withLock { $0 } }
}

/// A cache on a fresh P-256 key, a settable clock, and a log of what the
/// mint observer was told.
struct CacheFixture {
    let keys: KeyFiles
    let clock = TestClock()
    let log = MintLog()
    let cache: ProviderTokenCache

    init() throws {
        keys = try KeyFiles()
        let credentials = try ProviderCredentials(keyID: "KEY0123456", teamID: "TEAMABCDEF", keyPath: keys.p256())
        let (clock, log) = (clock, log)
        cache = ProviderTokenCache(credentials: credentials, now: { clock.now }, onMint: { log.record($0) })
    }

    var mintsObserved: [Int64] { log.all }
}

@Suite("Provider token cache: APNs' refresh rules under an injected clock")
struct ProviderTokenCachePolicyTests {
    static let minute: Int64 = 60

    @Test("first use mints; 49:59 reuses; 50:00 re-mints; the observer hears each mint's issue time")
    func refreshSchedule() throws {
        let fixture = try CacheFixture()
        defer { fixture.keys.remove() }
        let cache = fixture.cache
        #expect(cache.mintCount == 0)
        #expect(cache.currentTokenAgeSeconds == nil)
        let start = fixture.clock.now

        let first = cache.current()
        #expect(first.issuedAt == start)
        #expect(cache.mintCount == 1)
        #expect(cache.currentTokenAgeSeconds == 0)

        fixture.clock.advance(49 * Self.minute + 59)
        #expect(cache.current() == first)
        #expect(cache.mintCount == 1)
        #expect(cache.currentTokenAgeSeconds == 49 * Self.minute + 59)

        fixture.clock.advance(1)
        let second = cache.current()
        #expect(second != first)
        #expect(second.issuedAt == start + 50 * Self.minute)
        #expect(cache.mintCount == 2)
        #expect(cache.currentTokenAgeSeconds == 0)
        #expect(fixture.mintsObserved == [start, start + 50 * Self.minute])
    }

    @Test("no re-mint at 20 or 30 minutes without a rejection: only age 50 or APNs' word replaces a token")
    func noEarlyRemint() throws {
        let fixture = try CacheFixture()
        defer { fixture.keys.remove() }
        let first = fixture.cache.current()
        for _ in 0..<4 {
            fixture.clock.advance(10 * Self.minute)
            #expect(fixture.cache.current() == first)
        }
        #expect(fixture.cache.mintCount == 1)
    }

    @Test("a rejection at 5 minutes re-mints at once; a second rejection of the old token does nothing")
    func rejectionAtFiveMinutes() throws {
        let fixture = try CacheFixture()
        defer { fixture.keys.remove() }
        let cache = fixture.cache
        let first = cache.current()
        fixture.clock.advance(5 * Self.minute)

        cache.invalidate(rejected: first)
        #expect(cache.mintCount == 1, "invalidation alone does not sign; the next use does")
        let second = cache.current()
        #expect(second != first)
        #expect(second.issuedAt == first.issuedAt + 5 * Self.minute)
        #expect(cache.mintCount == 2)

        cache.invalidate(rejected: first)
        #expect(cache.current() == second)
        #expect(cache.mintCount == 2)
        #expect(fixture.mintsObserved.count == 2)
    }

    @Test("a stale token's rejection does not re-mint, by value or by header")
    func staleRejection() throws {
        let fixture = try CacheFixture()
        defer { fixture.keys.remove() }
        let cache = fixture.cache
        let first = cache.current()
        fixture.clock.advance(50 * Self.minute)
        let second = cache.current()
        cache.invalidate(rejected: first)
        cache.invalidate(authorizationHeaderValue: first.authorizationHeaderValue)
        #expect(cache.current() == second)
        #expect(cache.mintCount == 2)
        // The current token, rejected by its header value, is replaced.
        cache.invalidate(authorizationHeaderValue: second.authorizationHeaderValue)
        #expect(cache.current() != second)
        #expect(cache.mintCount == 3)
    }

    @Test("200 concurrent tasks on a fresh cache share one mint, and the observer hears it once")
    func concurrentFirstUse() async throws {
        let fixture = try CacheFixture()
        defer { fixture.keys.remove() }
        let cache = fixture.cache
        let headers = await withTaskGroup(of: String.self) { group in
            for _ in 0..<200 { group.addTask { cache.current().authorizationHeaderValue } }
            var seen = Set<String>()
            for await header in group { seen.insert(header) }
            return seen
        }
        #expect(headers.count == 1)
        #expect(cache.mintCount == 1)
        #expect(fixture.mintsObserved.count == 1)
    }

    @Test("200 concurrent rejections, some of an older token, cause exactly one re-mint")
    func concurrentRejections() async throws {
        let fixture = try CacheFixture()
        defer { fixture.keys.remove() }
        let cache = fixture.cache
        let old = cache.current()
        fixture.clock.advance(50 * Self.minute)
        let rejected = cache.current()
        fixture.clock.advance(3 * Self.minute)
        let after = await withTaskGroup(of: ProviderToken.self) { group in
            for index in 0..<200 {
                group.addTask {
                    cache.invalidate(rejected: index.isMultiple(of: 4) ? old : rejected)
                    return cache.current()
                }
            }
            var seen = Set<ProviderToken>()
            for await token in group { seen.insert(token) }
            return seen
        }
        #expect(cache.mintCount == 3)
        let replacement = cache.current()
        #expect(replacement.issuedAt == rejected.issuedAt + 3 * Self.minute)
        // A caller that ran before the first rejection landed may still hold the rejected token; nobody got a third.
        #expect(after.isSubset(of: [rejected, replacement]) && after.contains(replacement))
    }

    @Test("a clock stepped backwards re-mints: a token from APNs' future would be rejected")
    func clockStepsBack() throws {
        let fixture = try CacheFixture()
        defer { fixture.keys.remove() }
        let first = fixture.cache.current()
        fixture.clock.advance(-10 * Self.minute)
        let second = fixture.cache.current()
        #expect(second != first)
        #expect(second.issuedAt == first.issuedAt - 10 * Self.minute)
        #expect(fixture.cache.current() == second)
    }

    @Test("neither key nor token nor cache prints the JWT or the key's PEM body")
    func nothingSecretPrints() throws {
        let fixture = try CacheFixture()
        defer { fixture.keys.remove() }
        let pem = try String(contentsOfFile: fixture.keys.path("AuthKey_TEST.p8"), encoding: .utf8)
        let token = fixture.cache.current()
        let jwt = String(token.authorizationHeaderValue.dropFirst("bearer ".count))
        let key = fixture.cache.credentials.key
        var dumps = ""
        dump(token, to: &dumps)
        dump(key, to: &dumps)
        dump(fixture.cache, to: &dumps)
        let texts = [
            "\(token)", String(reflecting: token), token.description, token.debugDescription,
            "\(key)", String(reflecting: key), key.description, "\(fixture.cache.credentials)", dumps,
        ]
        let secrets = [jwt] + jwt.split(separator: ".").map(String.init) + pemBody(pem)
        for text in texts {
            for secret in secrets {
                #expect(!text.contains(secret), "\(text) shows a secret")
            }
        }
        #expect(token.description.contains("<redacted>"))
        #expect(key.description.contains(key.fingerprint))
    }
}
