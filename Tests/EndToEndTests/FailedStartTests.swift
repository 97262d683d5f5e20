import Foundation
import Testing
import TestSupport

/// Issue 29, item 1: nothing starts in an initializer. A relay whose start
/// failed (its ingress port taken) used to leave its idempotency purge
/// running, deleting keys for a relay that never served. Now the purge is
/// one of the relay's parts and runs only once the relay has started.
@Suite("A relay whose start failed leaves nothing running")
struct FailedStartTests {
    /// An expired key of a caller no other test uses: what a running purge deletes.
    static func insertExpiredKey(_ url: String, caller: String) async throws {
        _ = try await OutcomeAgreementTests.psql(url, """
            INSERT INTO apns_idempotency_keys (caller, key_hash, request_hash, state, owner, lease_until, created_at, expires_at)
            VALUES ('\(caller)', 'k', 'r', 'done', 'o', '2000-01-01', '2000-01-01', '2000-01-02')
            """)
    }

    static func keys(_ url: String, caller: String) async throws -> Int {
        let rows = try await OutcomeAgreementTests.psql(url, "SELECT count(*) FROM apns_idempotency_keys WHERE caller = '\(caller)'")
        return Int(rows.first?.first ?? "") ?? -1
    }

    @Test("ingress port in use: the start throws naming ingress.listen, and no purge runs afterwards; a relay that starts purges with the same interval")
    func portInUse() async throws {
        guard let url = IdempotencyTests.databaseURL else { return }
        let caller = "failed-start-\(UUID().uuidString.prefix(8))"
        // Migrations first (a relay on the database applies them), so the key can be inserted.
        try await withRelay(databaseURL: url) { _ in }
        try await Self.insertExpiredKey(url, caller: caller)
        let interval = 0.05
        try await withRelay { holder in
            // The holder has no database, so no purge of its own.
            let taken = holder.server.ingressAddress.port
            let error = await #expect(throws: (any Error).self) {
                _ = try await TestRelay.start(databaseURL: url, configure: { configuration in
                    configuration.ingress.listen = .init(host: "127.0.0.1", port: taken)
                    configuration.ingress.idempotencyPurgeIntervalSeconds = interval
                })
            }
            #expect(String(describing: error).contains("ingress.listen"), "\(String(describing: error))")
        }
        // Forty purge intervals: a purge left running would have deleted the key by now.
        try await Task.sleep(for: .seconds(interval * 40))
        #expect(try await Self.keys(url, caller: caller) == 1, "a relay that never started purged keys")
        // The control: a relay that starts, with the same interval, does purge it.
        try await withRelay(databaseURL: url, configure: { $0.ingress.idempotencyPurgeIntervalSeconds = interval }) { _ in
            #expect(await eventually(30) { (try? await Self.keys(url, caller: caller)) == 0 })
        }
    }
}
