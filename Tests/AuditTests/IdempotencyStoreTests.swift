@testable import Audit
import Foundation
import Relay
import Synchronization
import Testing

/// `PostgresIdempotencyStore` against the Postgres of scripts/test: the claim
/// that makes one sender out of many, the answer kept, the window and the lease.
@Suite("Idempotency store")
struct IdempotencyStoreTests {
    final class TestClock: Sendable {
        let now = Mutex<Int64>(1_600_000_000_000)
        func advance(seconds: Int64) { now.withLock { $0 += seconds * 1000 } }
    }

    static func claim(_ key: String, request: String = "request-a", token: String = UUID().uuidString) -> IdempotencyClaim {
        IdempotencyClaim(caller: "backend", keyHash: "hash-\(key)", requestHash: request, token: token)
    }

    static let answer = IdempotentAnswer(
        apnsID: "7f1c8f0e-3d2b-4b7a-9c1d-2e3f4a5b6c7d", status: 200, reason: nil, attempts: 1, httpStatus: 200,
        headers: [("content-type", "application/json"), ("apns-id", "7f1c8f0e-3d2b-4b7a-9c1d-2e3f4a5b6c7d")],
        body: Array(#"{"apnsId":"7f1c8f0e-3d2b-4b7a-9c1d-2e3f4a5b6c7d","status":200}"#.utf8))

    @Test("many claims racing on each key: exactly one is claimed, the others see it in flight")
    func race() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        // Two stores: two relays, each with its own connections.
        // The relays' clock stands still: on a loaded machine the run can outlast the 60 s window.
        let clock = TestClock()
        let stores = (0..<2).map { _ in
            PostgresIdempotencyStore(conninfo: database.conninfo, windowSeconds: 60, leaseSeconds: 60, now: { clock.now.withLock { $0 } })
        }
        for key in 0..<20 {
            let verdicts = await withTaskGroup(of: IdempotencyVerdict?.self) { group in
                for index in 0..<8 {
                    group.addTask { try? await stores[index % 2].claim(Self.claim("race-\(key)")) }
                }
                return await group.reduce(into: [IdempotencyVerdict?]()) { $0.append($1) }
            }
            #expect(verdicts.count { $0 == .claimed } == 1, "key \(key): \(verdicts)")
            #expect(verdicts.count { $0 == .inFlight } == 7, "key \(key): \(verdicts)")
        }
    }

    @Test("a completed key gives its answer back byte for byte; another request is reused; a released key may be claimed again")
    func answerKept() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        // The clock stands still: under load these statements once took 76 s,
        // past the 60 s window, and the key was claimed afresh instead of answered.
        let clock = TestClock()
        let store = PostgresIdempotencyStore(
            conninfo: database.conninfo, windowSeconds: 60, leaseSeconds: 60, now: { clock.now.withLock { $0 } })
        let first = Self.claim("kept")
        #expect(try await store.claim(first) == .claimed)
        // The same claim run again (a connection lost after its INSERT) still holds the key.
        #expect(try await store.claim(first) == .claimed)
        try await store.complete(first, answer: Self.answer)
        #expect(try await store.claim(Self.claim("kept")) == .done(Self.answer))
        #expect(try await store.claim(Self.claim("kept", request: "request-b")) == .reused)

        let released = Self.claim("released")
        #expect(try await store.claim(released) == .claimed)
        try await store.release(released)
        #expect(try await store.claim(Self.claim("released")) == .claimed)
    }

    @Test("past the window a key is claimed afresh; past its lease an in-flight key is taken over and its old holder cannot complete it")
    func windowAndLease() async throws {
        let database = try TestDatabase.migrated()
        defer { database.drop() }
        let clock = TestClock()
        let store = PostgresIdempotencyStore(
            conninfo: database.conninfo, windowSeconds: 100, leaseSeconds: 10, now: { clock.now.withLock { $0 } })
        let done = Self.claim("window")
        #expect(try await store.claim(done) == .claimed)
        try await store.complete(done, answer: Self.answer)
        clock.advance(seconds: 99)
        #expect(try await store.claim(Self.claim("window")) == .done(Self.answer))
        clock.advance(seconds: 1)
        #expect(try await store.claim(Self.claim("window")) == .claimed)

        let stuck = Self.claim("lease")
        #expect(try await store.claim(stuck) == .claimed)
        clock.advance(seconds: 9)
        #expect(try await store.claim(Self.claim("lease")) == .inFlight)
        clock.advance(seconds: 1)
        let taker = Self.claim("lease")
        #expect(try await store.claim(taker) == .claimed)
        try await store.complete(stuck, answer: Self.answer)
        #expect(try await store.claim(Self.claim("lease")) == .inFlight, "the stale holder's answer must not land")

        // Purging is bounded and only takes expired rows.
        clock.advance(seconds: 1000)
        #expect(try await store.purgeExpired(limit: 1) == 1)
        #expect(try await store.purgeExpired(limit: 100) == 1)
        #expect(try await store.purgeExpired(limit: 100) == 0)
    }
}
