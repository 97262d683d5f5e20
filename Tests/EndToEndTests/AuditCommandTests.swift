import Foundation
import MockAPNs
import RelayJSON
import Testing
import TestSupport

/// `apns-relay audit …` as on-call runs it, against rows a relay wrote to the real Postgres.
@Suite("apns-relay audit output")
struct AuditCommandTests {
    /// RFC 3339 in UTC, as the API prints it (`2026-11-22T08:41:37.123Z`).
    static func isRFC3339UTC(_ text: String) -> Bool {
        text.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z/) != nil
    }

    /// Every cell of a table or JSON output that looks like a date, RFC 3339 or not.
    static func dates(in output: String) -> [String] {
        output.matches(of: /\d{4}-\d{2}-\d{2}[T ][0-9:.+Z\-]+/).map { String($0.output).trimmingCharacters(in: CharacterSet(charactersIn: "\",")) }
    }

    @Test("audit show, token, traps and dead-tokens print whole tokens and RFC 3339 UTC timestamps")
    func wholeTokensAndRFC3339() async throws {
        guard let url = ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] else { return }
        let rules = [MockRule(.tokenPrefix("dd"), always: .unregistered(at: 1_700_000_000_000))]
        let relay = try await TestRelay.start(rules: rules, databaseURL: url)
        let token = TestRelay.token(Int.random(in: 1...1_000_000), prefix: "dd")
        let apnsID: String
        do {
            let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: token))
            #expect(answer.status == 410, "\(answer)")
            apnsID = try #require(answer.error?["apnsId"]?.stringValue)
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()  // flushes the audit rows and the dead token

        func audit(_ arguments: [String]) async throws -> String {
            let (status, output) = try await ProcessRunner.runOffPool([RelayProcess.binary, "audit"] + arguments + ["--database-url", url])
            #expect(status == 0, "\(arguments): \(output)")
            return output
        }
        let dead = try await audit(["dead-tokens", "--app", "app-a", "--since", "1h"])
        #expect(dead.contains(token), "the whole token, ready to prune:\n\(dead)")
        #expect(!dead.contains("…"), "\(dead)")
        let deadJSON = try await audit(["dead-tokens", "--app", "app-a", "--since", "1h", "--format", "json"])
        let row = try #require(try JSONParser.parse(deadJSON).arrayValue?.first { $0["token"] == .string(token) })
        #expect(row["apns_timestamp"] == "2023-11-14T22:13:20.000Z", "\(row)")
        for column in ["first_seen", "last_seen"] {
            #expect(row[column]?.stringValue.map { Self.isRFC3339UTC($0) } == true, "\(column): \(row)")
        }

        let show = try await audit(["show", apnsID])
        #expect(show.contains("Unregistered") && show.contains("(1 row)"), "\(show)")
        let token1 = try await audit(["token", token])
        #expect(token1.contains(apnsID), "\(token1)")
        let traps = try await audit(["traps", "--since", "1h"])
        #expect(traps.contains("MS020"), "\(traps)")
        for output in [dead, deadJSON, show, token1, traps] {
            let found = Self.dates(in: output)
            #expect(!found.isEmpty, "no timestamp in:\n\(output)")
            #expect(found.allSatisfy { Self.isRFC3339UTC($0) }, "\(found.filter { !Self.isRFC3339UTC($0) }) in:\n\(output)")
        }
    }
}
