import Foundation
import RelayJSON
import Testing

/// Who may do what: API keys, app scopes, admin, rate limits.
@Suite("Ingress authentication and authorization")
struct IngressAuthTests {
    struct Case: Sendable, CustomStringConvertible {
        var name: String
        var method: String
        var path: String
        var key: String?
        var body: String?
        var status: Int
        var type: String?
        var description: String { name }
    }

    static let cases: [Case] = [
        Case(name: "no Authorization header", method: "POST", path: "/v1/send", key: nil, body: TestRelay.send(), status: 401, type: "Unauthorized"),
        Case(name: "an unknown key", method: "POST", path: "/v1/send", key: "key-nobody-has", body: TestRelay.send(), status: 401, type: "Unauthorized"),
        Case(name: "a key's hash presented as the key", method: "POST", path: "/v1/send",
             key: "b7c9a4b3a7b4c4b7b8c0f0b1b6f6e0e3c3a1d1e0a3f4b1c2d3e4f5a6b7c8d9e0", body: TestRelay.send(), status: 401, type: "Unauthorized"),
        Case(name: "a key scoped to another app", method: "POST", path: "/v1/send", key: "other", body: TestRelay.send(app: "app-a"), status: 403, type: "Forbidden"),
        Case(name: "an app the relay does not serve", method: "POST", path: "/v1/send", key: "admin", body: TestRelay.send(app: "app-z"), status: 404, type: "NotFound"),
        // Issue 27: a scoped key learns nothing about apps outside its scope,
        // served or not (see sameAnswerOutsideScope).
        Case(name: "an unknown app with a scoped key", method: "POST", path: "/v1/send", key: "other", body: TestRelay.send(app: "app-z"), status: 403, type: "Forbidden"),
        Case(name: "channels of an unknown app with a scoped key", method: "GET", path: "/v1/channels?app=app-z&environment=development", key: "other", body: nil, status: 403, type: "Forbidden"),
        Case(name: "describe for another app's key", method: "POST", path: "/v1/describe", key: "other", body: TestRelay.send(app: "app-a"), status: 403, type: "Forbidden"),
        Case(name: "channels of another app", method: "GET", path: "/v1/channels?app=app-a&environment=development", key: "other", body: nil, status: 403, type: "Forbidden"),
        Case(name: "dead tokens of another app", method: "GET", path: "/v1/dead-tokens?app=app-a", key: "other", body: nil, status: 403, type: "Forbidden"),
        Case(name: "changing the kill switch without admin", method: "PUT", path: "/v1/admin/retry", key: "backend", body: #"{"disabled":true}"#, status: 403, type: "Forbidden"),
        Case(name: "reading the kill switch with any key", method: "GET", path: "/v1/admin/retry", key: "other", body: nil, status: 200, type: nil),
        Case(name: "a scoped key on its own app", method: "POST", path: "/v1/send", key: "other", body: TestRelay.send(app: "app-b"), status: 200, type: nil),
        Case(name: "an admin key on any app", method: "POST", path: "/v1/send", key: "admin", body: TestRelay.send(app: "app-b"), status: 200, type: nil),
        Case(name: "the kill switch with admin", method: "GET", path: "/v1/admin/retry", key: "admin", body: nil, status: 200, type: nil),
        // app-a and app-b share one team signing key: APNs would take either topic from either app.
        Case(name: "a raw send to the key's own app's topic", method: "POST", path: "/v1/send", key: "backend", body: raw(topic: "com.example.a"), status: 200, type: nil),
        Case(name: "a raw send for app-a to app-b's topic", method: "POST", path: "/v1/send", key: "backend", body: raw(topic: "com.example.b"), status: 403, type: "Forbidden"),
        Case(name: "an admin key's raw send for app-a to app-b's topic", method: "POST", path: "/v1/send", key: "admin", body: raw(topic: "com.example.b"), status: 403, type: "Forbidden"),
    ]

    static func raw(topic: String) -> String {
        #"{"app":"app-a","environment":"development","operation":"raw","token":"\#(TestRelay.token(1))","headers":{"apns-push-type":"alert","apns-topic":"\#(topic)"},"payload":{"aps":{"alert":"hi"}}}"#
    }

    @Test("the auth matrix", arguments: cases)
    func matrix(_ check: Case) async throws {
        try await withRelay { relay in
            let answer = try await relay.curl(check.method, check.path, key: check.key, body: check.body)
            #expect(answer.status == check.status, "\(check.name): \(answer)")
            if let type = check.type {
                #expect(answer.error?["type"] == .string(type), "\(answer)")
                #expect(relay.apnsRequests == 0, "nothing reaches APNs for a refused caller")
            }
            if check.status == 401 { #expect(answer.headers["www-authenticate"]?.hasPrefix("Bearer") == true) }
            // Neither the presented key nor any configured key's hash may leak into an answer.
            #expect(!answer.body.contains("key-"), "\(answer.body)")
        }
    }

    @Test("a scoped key gets the same answer for another tenant's app and for an app that does not exist: nothing to enumerate app names with")
    func sameAnswerOutsideScope() async throws {
        try await withRelay { relay in
            for path in ["/v1/send", "/v1/describe"] {
                let existing = try await relay.curl("POST", path, key: "other", body: TestRelay.send(app: "app-a"))
                let missing = try await relay.curl("POST", path, key: "other", body: TestRelay.send(app: "app-q"))
                #expect(existing.status == 403 && missing.status == 403, "\(existing) / \(missing)")
                // The same body but for the name the caller chose itself.
                #expect(existing.body.replacingOccurrences(of: "app-a", with: "app-q") == missing.body, "\(existing.body) / \(missing.body)")
            }
            #expect(relay.apnsRequests == 0)
        }
    }

    @Test("a key over its rate gets 429 with Retry-After, and its own bucket only")
    func rateLimit() async throws {
        try await withRelay { relay in
            // "limited": 0.001 requests/s, burst 2.
            var statuses: [Int] = []
            for _ in 0..<3 { statuses.append(try await relay.curl("POST", "/v1/send", key: "limited", body: TestRelay.send()).status) }
            #expect(statuses == [200, 200, 429])
            let limited = try await relay.curl("POST", "/v1/send", key: "limited", body: TestRelay.send())
            #expect(limited.status == 429 && limited.error?["type"] == "RateLimited")
            #expect(Int(limited.headers["retry-after"] ?? "") ?? 0 >= 1)
            #expect(try await relay.curl("POST", "/v1/send", key: "backend", body: TestRelay.send()).status == 200)
            #expect(relay.apnsRequests == 3)
        }
    }

    @Test("the caller's key name is recorded as the audit row's caller")
    func callerAudited() async throws {
        guard let url = ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] else { return }
        try await withRelay(databaseURL: url) { relay in
            let answer = try await relay.curl("POST", "/v1/send", key: "other", body: TestRelay.send(app: "app-b"))
            let apnsID = try #require(answer.json?["apnsId"]?.stringValue)
            let found = await eventually { relay.server.audit.statistics.written >= 1 }
            #expect(found)
            let (status, output) = try await ProcessRunner.runOffPool(["psql", url, "-At", "-c", "SELECT caller, app FROM apns_audit WHERE apns_id = '\(apnsID)'"])
            #expect(status == 0)
            #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == "other|app-b")
        }
    }
}

import TestSupport
