import Foundation
import MockAPNs
import Testing
import TestSupport

/// A send the relay is killed during comes back from the journal as an
/// `unknown` row saying how many attempts may have reached APNs (issue 28.3).
@Suite("apns-relay serve killed mid-send: the recovered row's attempts")
struct RecoveredAttemptsProcessTests {
    @Test("SIGKILL while APNs holds a send's second attempt (the first was a 429): the next relay's row is unknown / relay_stopped with attempts 2, retried; a send held on its first attempt says 1",
          arguments: ["interval", "always"])
    func killedMidSend(journalSync: String) async throws {
        guard let url = ServeProcessTests.databaseURL else { return }
        let relay = try await TestRelay.start(rules: [
            MockRule(.tokenPrefix("dead"), [.tooManyRequests(), .hold]),
            MockRule(.tokenPrefix("beef"), [.hold]),
        ])
        defer { Task { await relay.stop() } }
        let instance = "serve-mid-\(UUID().uuidString.prefix(6))"
        let spool = relay.directory + "/spool-mid-\(journalSync)"
        let config = try ServeProcessTests.writeConfiguration(
            directory: relay.directory, mock: relay.mock, keyPath: relay.keyPath, instance: instance,
            databaseURL: url, spool: spool, journalSync: journalSync)
        let serve = try RelayProcess(arguments: ["serve", "--config", config])
        let port = try await serve.port(after: "apns-relay ingress on")
        let retried = UUID().uuidString.lowercased()
        let once = UUID().uuidString.lowercased()
        // Neither send is answered: the relay is killed while APNs holds them.
        for (token, id) in [(TestRelay.token(1, prefix: "dead"), retried), (TestRelay.token(2, prefix: "beef"), once)] {
            let body = TestRelay.send(token: token, extra: #","apnsId":"\#(id)""#)
            Task { _ = try? await relay.curl("POST", "/v1/send", body: body, base: "http://127.0.0.1:\(port)") }
        }
        let inFlight = await eventually {
            relay.mock.engine.log.attempts(apnsID: retried).count == 2 && relay.mock.engine.log.attempts(apnsID: once).count == 1
        }
        #expect(inFlight, "APNs got both attempts of one send and the first of the other")
        serve.signal(SIGKILL)
        #expect(await serve.waitForExit() != 0)

        // The next relay on the same spool directory recovers the journal.
        try await withRelay(databaseURL: url, configure: { $0.audit.spoolDirectory = spool }) { next in
            let recovered = await eventually { next.server.audit.statistics.recoveredUnknown >= 2 && next.server.audit.statistics.replayed >= 2 }
            #expect(recovered, "\(next.server.audit.statistics)")
        }
        let rows = try await ServeProcessTests.scalar(url, """
            SELECT string_agg(apns_id || ' ' || outcome || ' ' || error_type || ' ' || attempts || ' ' || retried, ',' ORDER BY attempts DESC)
            FROM apns_audit WHERE apns_id IN ('\(retried)', '\(once)')
            """)
        #expect(rows == "\(retried) unknown relay_stopped 2 true,\(once) unknown relay_stopped 1 false")
    }
}
