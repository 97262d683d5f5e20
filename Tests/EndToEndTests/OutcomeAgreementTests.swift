import Foundation
import MockAPNs
import RelayJSON
import Testing
import TestSupport

/// The relay's three records of a send (the answer, the audit row, the
/// metrics) against a mock APNs scripted with faults: they must tell the same
/// story, and a dry run must tell none.
@Suite("Answer, audit and metrics agree")
struct OutcomeAgreementTests {
    static var databaseURL: String? { ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] }

    /// `name{labels} value` lines of a scrape whose name is `metric`, as (labels, value).
    static func samples(_ scrape: String, _ metric: String) -> [(labels: String, value: Double)] {
        scrape.split(separator: "\n").compactMap { line in
            guard line.hasPrefix(metric + "{"), let close = line.lastIndex(of: "}") else { return nil }
            let labels = String(line[line.index(line.startIndex, offsetBy: metric.count + 1)..<close])
            guard let value = Double(line[line.index(after: close)...].trimmingCharacters(in: .whitespaces)) else { return nil }
            return (labels, value)
        }
    }

    /// Sum of `metric` per value of `label`.
    static func sums(_ scrape: String, _ metric: String, by label: String) -> [String: Int] {
        var result: [String: Int] = [:]
        for sample in samples(scrape, metric) {
            guard let range = sample.labels.range(of: "\(label)=\"") else { continue }
            let value = sample.labels[range.upperBound...].prefix { $0 != "\"" }
            result[String(value), default: 0] += Int(sample.value)
        }
        return result
    }

    static func psql(_ url: String, _ sql: String) async throws -> [[String]] {
        let (status, output) = try await ProcessRunner.runOffPool(["psql", url, "-At", "-F", "\t", "-c", sql])
        guard status == 0 else { throw TestRelayError("psql: \(output)") }
        return output.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
    }

    static let invalidSnapshot = TestRelay.liveSnapshot.replacingOccurrences(of: #""progress":0.4"#, with: #""progress":1.4"#)
    static let backgroundAtTen = #"{"app":"app-a","environment":"development","operation":"background","token":"\#(TestRelay.token(3))","priority":10}"#

    @Test("POST /v1/describe records nothing: no audit row, no send or trap metric, valid or not")
    func describeRecordsNothing() async throws {
        guard let url = Self.databaseURL else { return }
        let relay = try await TestRelay.start(databaseURL: url)
        let instance = relay.server.configuration.instance
        do {
            for (body, status) in [(TestRelay.send(), 200), (TestRelay.send(snapshot: Self.invalidSnapshot), 400), (Self.backgroundAtTen, 400)] {
                let answer = try await relay.curl("POST", "/v1/describe", body: body)
                #expect(answer.status == status, "\(answer)")
                #expect(answer.headers["apns-id"] == nil && answer.error?["apnsId"] == nil, "a dry run has no send id: \(answer)")
            }
            let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase).body
            #expect(Self.samples(scrape, "apns_relay_sends_total").isEmpty, "\(Self.samples(scrape, "apns_relay_sends_total"))")
            #expect(Self.samples(scrape, "apns_relay_trap_hits_total").isEmpty)
            // The same invalid body as a real send is recorded: the test can see a row when there is one.
            #expect(try await relay.curl("POST", "/v1/send", body: TestRelay.send(snapshot: Self.invalidSnapshot)).status == 400)
            let after = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase).body
            #expect(Self.sums(after, "apns_relay_sends_total", by: "outcome") == ["rejected": 1])
            #expect(Self.sums(after, "apns_relay_trap_hits_total", by: "trap") == ["MS008": 1])
            #expect(relay.apnsRequests == 0)
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
        let rows = try await Self.psql(url, "SELECT operation, error_type FROM apns_audit WHERE relay_instance = '\(instance)'")
        #expect(rows == [["alert", "InvalidSnapshot"]], "only the real send has a row: \(rows)")
    }

    @Test("a send APNs never answers ends at its deadline: 504 Timeout, audited and counted as deadline_exceeded")
    func deadline() async throws {
        let url = Self.databaseURL
        let relay = try await TestRelay.start(rules: [MockRule(.tokenPrefix("ee"), always: .noAnswer), MockRule(.tokenPrefix("ff"), always: .resetConnection)],
                                              databaseURL: url) { configuration in
            configuration.apns.requestTimeoutSeconds = 0.5
            configuration.apns.sendDeadlineSeconds = 1.2
        }
        let instance = relay.server.configuration.instance
        var timedOut: String?
        do {
            let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(1, prefix: "ee")))
            #expect(answer.status == 504, "\(answer)")
            #expect(answer.error?["type"] == "Timeout", "\(answer)")
            #expect((answer.error?["attempts"]?.integerValue ?? 0) >= 1, "\(answer)")
            timedOut = answer.error?["apnsId"]?.stringValue
            // A transport failure on every attempt, well inside the deadline, stays 502.
            let reset = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(2, prefix: "ff")))
            #expect(reset.status == 502 && reset.error?["type"] == "Upstream", "\(reset)")
            let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase).body
            let sends = Self.samples(scrape, "apns_relay_sends_total").map(\.labels)
            #expect(sends.contains { $0.contains(#"outcome="failed""#) && $0.contains(#"reason="deadline_exceeded""#) }, "\(sends)")
            #expect(sends.contains { $0.contains(#"outcome="failed""#) && $0.contains(#"reason="transport_connection""#) }, "\(sends)")
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
        guard let url, let timedOut else { return }
        let rows = try await Self.psql(url, "SELECT outcome, error_type FROM apns_audit WHERE relay_instance = '\(instance)' AND apns_id = '\(timedOut)'")
        #expect(rows == [["failed", "deadline_exceeded"]], "\(rows)")
    }

    @Test("a trap hit has one definition: the metric, the audit rows and the answers count the same per trap")
    func trapCountsAgree() async throws {
        guard let url = Self.databaseURL else { return }
        let rules = [
            MockRule(.tokenPrefix("a1"), [.tooManyRequests(), .succeed]),            // MS015, then delivered
            MockRule(.tokenPrefix("a2"), always: .tooManyRequests()),                 // MS015, final 429
            MockRule(.tokenPrefix("a3"), [.reject(reason: "InternalServerError", status: 500), .succeed]),
            MockRule(.tokenPrefix("a4"), always: .unregistered(at: 1_700_000_000_000)), // MS020
            MockRule(.tokenPrefix("a5"), [.tooManyRequests(), .unregistered(at: 1_700_000_000_000)]), // MS015 and MS020
            MockRule(.tokenPrefix("a6"), always: .reject(reason: "BadDeviceToken", status: 400)), // MS014
        ]
        let relay = try await TestRelay.start(rules: rules, databaseURL: url)
        let instance = relay.server.configuration.instance
        var answered: [String: Int] = [:]
        var expected: [String: Int] = [:]
        do {
            var bodies: [(String, [String])] = []
            for (prefix, traps) in [("a1", ["MS015"]), ("a2", ["MS015"]), ("a3", []), ("a4", ["MS020"]), ("a5", ["MS015", "MS020"]), ("a6", ["MS014"]), ("00", [])] {
                for index in 0..<3 { bodies.append((TestRelay.send(token: TestRelay.token(index, prefix: prefix)), traps)) }
            }
            bodies.append((TestRelay.send(snapshot: Self.invalidSnapshot), ["MS008"]))
            let big = String(repeating: "x", count: 5000)
            bodies.append((#"{"app":"app-a","environment":"development","operation":"raw","token":"\#(TestRelay.token(9))","headers":{"apns-push-type":"alert"},"payload":{"aps":{"alert":"\#(big)"}}}"#, ["MS011"]))
            for (body, traps) in bodies {
                for trap in traps { expected[trap, default: 0] += 1 }
                let answer = try await relay.curl("POST", "/v1/send", body: body)
                let hits = (answer.json?["trapHits"] ?? answer.error?["trapHits"])?.arrayValue?.compactMap(\.stringValue)
                #expect(hits.map(Set.init) == Set(traps), "\(answer)")
                for trap in hits ?? [] { answered[trap, default: 0] += 1 }
            }
            let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase).body
            let metric = Self.sums(scrape, "apns_relay_trap_hits_total", by: "trap")
            print("trap hits: answers \(answered.sorted { $0.key < $1.key }), metric \(metric.sorted { $0.key < $1.key })")
            #expect(metric == expected)
            #expect(answered == expected)
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
        var audited: [String: Int] = [:]
        for row in try await Self.psql(url, "SELECT trap, count(*) FROM apns_audit, unnest(trap_ids) AS trap WHERE relay_instance = '\(instance)' GROUP BY trap") {
            audited[row[0]] = Int(row[1])
        }
        print("trap hits: audit \(audited.sorted { $0.key < $1.key }), expected \(expected.sorted { $0.key < $1.key })")
        #expect(audited == expected)
    }

    @Test("an APNs answering reasons no catalog knows, hostile ones too (NUL, tab, newline, backslash, quotes, emoji, 4 KB): every send is answered and has exactly one row holding its reason (NUL as U+FFFD), none quarantined")
    func hostileReasons() async throws {
        guard let url = Self.databaseURL else { return }
        let reasons = ["Nul\u{0}Reason", "Tab\tNew\nLine\r\\Back\\N", #"Quote"{}[],'"#, "Émoji🦀\u{7F}\u{1B}", String(repeating: "Long", count: 1024)]
        let rules = reasons.indices.map { MockRule(.tokenPrefix("b\($0)"), always: .reject(reason: reasons[$0], status: 400)) }
        let relay = try await TestRelay.start(rules: rules, databaseURL: url)
        let instance = relay.server.configuration.instance
        var sent: [String: String] = [:]
        do {
            for index in reasons.indices {
                let answer = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(0, prefix: "b\(index)")))
                let apnsID = answer.headers["apns-id"] ?? answer.error?["apnsId"]?.stringValue
                #expect(answer.status >= 400 && answer.status < 500 && apnsID != nil, "\(answer)")
                if let apnsID { sent[apnsID] = reasons[index] }
            }
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
        #expect(relay.server.audit.statistics.quarantined == 0, "\(relay.server.audit.statistics)")
        func hex(_ text: String) -> String { text.utf8.map { String(format: "%02x", $0) }.joined() }
        let rows = try await Self.psql(url, """
            SELECT apns_id, encode(convert_to(reason, 'UTF8'), 'hex'), encode(convert_to(attempt_log->0->>'reason', 'UTF8'), 'hex')
            FROM apns_audit WHERE relay_instance = '\(instance)'
            """)
        #expect(rows.count == reasons.count, "\(rows.count) rows for \(reasons.count) sends")
        for row in rows {
            let expected = sent[row[0]].map { hex($0.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}")) }
            #expect(expected != nil && row[1] == expected && row[2] == expected, "\(row[0]): \(sent[row[0]].map { String($0.prefix(40)) } ?? "?")")
        }
    }

    @Test("rows of sends refused before any attempt carry the request's trace id")
    func refusalTraceIDs() async throws {
        guard let url = Self.databaseURL else { return }
        let relay = try await TestRelay.start(databaseURL: url)
        let instance = relay.server.configuration.instance
        let traceIDs = (0..<3).map { _ in UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased() }
        do {
            let bodies = [TestRelay.send(snapshot: Self.invalidSnapshot), Self.backgroundAtTen, TestRelay.send()]
            for (body, trace) in zip(bodies, traceIDs) {
                let answer = try await relay.curl("POST", "/v1/send", body: body, headers: ["traceparent: 00-\(trace)-00f067aa0ba902b7-01"])
                #expect(answer.headers["traceparent"]?.contains(trace) == true, "\(answer.headers)")
            }
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
        let rows = try await Self.psql(url, "SELECT coalesce(trace_id, ''), outcome, attempts FROM apns_audit WHERE relay_instance = '\(instance)' ORDER BY recorded_at")
        #expect(Set(rows.map { $0[0] }) == Set(traceIDs), "\(rows)")
    }

    @Test("/3/device takes the body as JSON whatever content-type says, as APNs does")
    func deviceWithoutJSONContentType() async throws {
        try await withRelay { relay in
            let payload = #"{"aps":{"alert":"hi"}}"#
            let headers = ["apns-topic: com.example.a", "apns-push-type: alert"]
            let form = try await relay.curl("POST", "/3/device/\(TestRelay.token(7))", body: payload, headers: headers + ["content-type: application/x-www-form-urlencoded"])
            #expect(form.status == 200, "\(form)")
            let none = try await relay.curl("POST", "/3/device/\(TestRelay.token(8))", body: payload, headers: headers + ["content-type:"])
            #expect(none.status == 200, "\(none)")
            // /v1 routes keep asking for JSON.
            let v1 = try await relay.curl("POST", "/v1/send", body: TestRelay.send(), headers: ["content-type: text/plain"])
            #expect(v1.status == 415, "\(v1)")
            #expect(relay.apnsRequests == 2)
        }
    }

    @Test("fix texts say what the relay did: retried, or not because retries are off; broadcasts name the broken rule")
    func fixFollowsDecision() async throws {
        try await withRelay(rules: [MockRule(.tokenPrefix("b5"), always: .reject(reason: "ServiceUnavailable", status: 503))]) { relay in
            let retried = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(1, prefix: "b5")))
            #expect(retried.status == 503 && retried.error?["attempts"] == 3, "\(retried)")
            #expect(retried.error?["fix"]?.stringValue?.hasPrefix("Retried 2 time(s) with backoff") == true, "\(retried)")

            let off = try await relay.curl("PUT", "/v1/admin/retry", key: "admin", body: #"{"disabled": true}"#)
            #expect(off.status == 200, "\(off)")
            let single = try await relay.curl("POST", "/v1/send", body: TestRelay.send(token: TestRelay.token(2, prefix: "b5")))
            #expect(single.status == 503 && single.error?["attempts"] == 1, "\(single)")
            let fix = single.error?["fix"]?.stringValue ?? ""
            #expect(fix.hasPrefix("Not retried: retries are disabled (kill switch)."), "\(single)")
            #expect(!fix.contains("retried with backoff"), "\(single)")

            let broadcast = #"{"app":"app-a","environment":"development","operation":"broadcast","channelId":"dHN0LXNyY2gtY2hubA==","collapseId":"c1","expiration":0,"snapshot":\#(TestRelay.liveSnapshot)}"#
            let refused = try await relay.curl("POST", "/v1/send", body: broadcast)
            #expect(refused.status == 400, "\(refused)")
            #expect(refused.error?["reason"] == "NotForBroadcast" && refused.error?["field"] == "collapseId", "\(refused)")
            #expect(refused.error?["fix"]?.stringValue?.contains("aps dictionary") == false, "\(refused)")
            // A payload rule's fix names the field and the rule, not another rule's advice.
            let early = try await relay.curl("POST", "/v1/send", body: TestRelay.send("update", extra: #","dismissalDate":1800000000"#))
            #expect(early.status == 400 && early.error?["field"] == "aps.dismissal-date", "\(early)")
            #expect(early.error?["fix"] == "Fix aps.dismissal-date: it is only allowed on event end.", "\(early)")
            #expect(relay.apnsRequests == 4)
        }
    }
}
