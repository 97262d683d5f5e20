import Foundation
import MockAPNs
import RelayJSON
import Testing
import TestSupport

/// Issue 30's fault gaps on the HTTP/2 APNs ingress: a Postgres of the
/// test's own stopped under a running relay. What `/v1/send` does there, the
/// listener does in APNs' words: a request that needs no idempotency key is
/// sent and answered, its audit row spooled and written once Postgres is
/// back; one that carries a key (`apns-id` on `/3/device`, `apns-request-id`
/// on a channel create or broadcast) is refused `503 ServiceUnavailable`
/// with `retry-after` and nothing sent, since the key that prevents a second
/// push cannot be claimed. Device sends by provider token and by client
/// certificate, and every channel request and broadcast.
@Suite("HTTP/2 APNs ingress: Postgres stopped under it", .serialized)
struct APNsHTTP2PostgresOutageTests {
    /// What one request was answered.
    struct Outcome {
        let name: String
        let status: Int
        let reason: String?
        /// `apns-id` (device sends) or `apns-request-id` (channels and broadcasts) answered.
        let id: String?
        let retryAfter: String?
    }

    @Test("Postgres stopped: unkeyed device sends (token and client certificate), channel create, list, read, delete and broadcast are sent and answered, their rows land once Postgres is back; keyed ones are 503 ServiceUnavailable, not sent, no row")
    func outage() async throws {
        let cluster = try #require(try await PrivateCluster.create(), "no Postgres binaries for a private cluster")
        let key = try APNsHTTP2IngressTests.BackendKey()
        let certificates = try APNsHTTP2ClientCertificateTests.Certificates()
        defer {
            key.file.remove()
            certificates.remove()
        }
        let fingerprint = try certificates.fingerprint("by-fingerprint").filter { $0 != ":" }.lowercased()
        do {
            try await APNsHTTP2IngressTests.withIngress(key: key, tls: true, databaseURL: cluster.url, configure: { configuration in
                configuration.audit.flushIntervalMilliseconds = 10
                configuration.apnsIngress.clientCAFile = certificates.caFile
                let backend = configuration.apiKeys.firstIndex { $0.name == "backend" }!
                configuration.apiKeys[backend].clientCertificate = .sha256(fingerprint)
            }) { relay, port, caFile in
                let auth = "authorization: bearer \(try key.token())"
                let deviceHeaders = ["apns-topic: com.example.a", "apns-push-type: alert"]
                let payload = #"{"aps":{"alert":"while Postgres is away"}}"#
                // A channel to read, broadcast on and delete: made while Postgres still runs.
                let made = try await APNsHTTP2ChannelTests.httpx(
                    port: port, caFile: caFile, "POST", "/1/apps/com.example.a/channels", [auth],
                    body: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)
                let channel = try #require(made.header("apns-channel-id"), "\(made)")
                #expect(await eventually { relay.server.audit.statistics.written >= 1 }, "\(relay.server.audit.statistics)")

                try await cluster.stop()
                var outcomes: [Outcome] = []
                func device(_ name: String, token: String, keyed: Bool, certificate: String? = nil) async throws {
                    let apnsID = UUID().uuidString.lowercased()
                    let headers = deviceHeaders + (keyed ? ["apns-id: \(apnsID)"] : [])
                    let answer: TestRelay.Answer?
                    if let certificate {
                        (_, answer) = try await APNsHTTP2ClientCertificateTests.curl(
                            port: port, serverCA: caFile, certificates: certificates, certificate: certificate,
                            path: "/3/device/\(token)", headers: headers, body: payload)
                    } else {
                        answer = try await APNsHTTP2IngressTests.curl(
                            port: port, caFile: caFile, token: try key.token(), path: "/3/device/\(token)", body: payload, headers: headers)
                    }
                    let got = try #require(answer, "\(name): no answer")
                    outcomes.append(Outcome(
                        name: name, status: got.status, reason: got.json?["reason"]?.stringValue, id: got.headers["apns-id"], retryAfter: got.headers["retry-after"]))
                }
                func channelRequest(_ name: String, _ method: String, _ path: String, _ headers: [String], body: String? = nil) async throws {
                    let got = try await APNsHTTP2ChannelTests.httpx(port: port, caFile: caFile, method, path, [auth] + headers, body: body)
                    outcomes.append(Outcome(
                        name: name, status: got.status, reason: got.reason, id: got.header("apns-request-id"), retryAfter: got.header("retry-after")))
                }
                let update = #"{"aps":{"timestamp":1763744531,"event":"update","content-state":{"n":1}}}"#
                let broadcast = ["apns-channel-id: \(channel)", "apns-push-type: liveactivity", "apns-expiration: 0"]
                try await device("device, token", token: TestRelay.token(31), keyed: false)
                try await device("device, token, apns-id", token: TestRelay.token(32), keyed: true)
                try await device("device, certificate", token: TestRelay.token(33), keyed: false, certificate: "by-fingerprint")
                try await device("device, certificate, apns-id", token: TestRelay.token(34), keyed: true, certificate: "by-fingerprint")
                try await channelRequest("create", "POST", "/1/apps/com.example.a/channels", [], body: #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#)
                try await channelRequest(
                    "create, apns-request-id", "POST", "/1/apps/com.example.a/channels", ["apns-request-id: \(UUID().uuidString.lowercased())"],
                    body: #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#)
                try await channelRequest("list", "GET", "/1/apps/com.example.a/all-channels", [])
                try await channelRequest("read", "GET", "/1/apps/com.example.a/channels", ["apns-channel-id: \(channel)"])
                try await channelRequest("broadcast", "POST", "/4/broadcasts/apps/com.example.a", broadcast, body: update)
                try await channelRequest(
                    "broadcast, apns-request-id", "POST", "/4/broadcasts/apps/com.example.a",
                    broadcast + ["apns-request-id: \(UUID().uuidString.lowercased())"], body: update)
                try await channelRequest("delete", "DELETE", "/1/apps/com.example.a/channels", ["apns-channel-id: \(channel)"])

                let expected: [String: (Int, String?)] = [
                    "device, token": (200, nil), "device, certificate": (200, nil), "create": (201, nil), "list": (200, nil),
                    "read": (200, nil), "broadcast": (200, nil), "delete": (204, nil),
                    "device, token, apns-id": (503, "ServiceUnavailable"), "device, certificate, apns-id": (503, "ServiceUnavailable"),
                    "create, apns-request-id": (503, "ServiceUnavailable"), "broadcast, apns-request-id": (503, "ServiceUnavailable"),
                ]
                for outcome in outcomes {
                    let (status, reason) = try #require(expected[outcome.name])
                    #expect(outcome.status == status && outcome.reason == reason, "\(outcome.name): \(outcome.status) \(String(describing: outcome.reason))")
                    #expect(outcome.id != nil, "\(outcome.name): no id answered")
                    if status == 503 { #expect(outcome.retryAfter != nil, "\(outcome.name): no retry-after") }
                }
                #expect(outcomes.count == expected.count)

                // APNs saw each answered request once, and none of the refused.
                let atAPNs = relay.mock.engine.log.entries.map { ($0.request.headers.value(of: "apns-id") ?? $0.request.headers.value(of: "apns-request-id") ?? "").lowercased() }
                let answered = outcomes.filter { $0.status < 300 }.compactMap(\.id)
                let refused = outcomes.filter { $0.status == 503 }.compactMap(\.id)
                for id in answered { #expect(atAPNs.filter { $0 == id }.count == 1, "\(id) reached APNs \(atAPNs.filter { $0 == id }.count) times") }
                for id in refused { #expect(!atAPNs.contains(id), "refused \(id) reached APNs") }
                #expect(relay.mock.engine.log.total == answered.count + 1, "APNs requests: \(relay.mock.engine.log.total), answered \(answered.count) + the first create")
                #expect(await eventually { relay.server.audit.statistics.spooled >= answered.count }, "rows spooled: \(relay.server.audit.statistics)")

                // Postgres back: one row per answered request, as its operation and caller; none for the refused.
                try await cluster.start()
                let landed = await AuditTally.waitForRows(of: Set(answered), in: cluster.url)
                #expect(landed, "rows did not land: \(relay.server.audit.statistics)")
                let counted = try await AuditTally.of(Set(answered), in: cluster.url)
                #expect(counted.missing == 0 && counted.duplicated == 0 && counted.answeredButUnknown == 0, "\(counted)")
                let ids = (answered + refused).map { "'\($0)'" }.joined(separator: ",")
                let rows = try await OutcomeAgreementTests.psql(cluster.url, "SELECT apns_id, operation, caller, status, outcome FROM apns_audit WHERE apns_id IN (\(ids))")
                let operations: [String: String] = [
                    "device, token": "raw", "device, certificate": "raw", "create": "channel_create", "list": "channel_list",
                    "read": "channel_read", "broadcast": "broadcast", "delete": "channel_delete",
                ]
                for outcome in outcomes where outcome.status < 300 {
                    let row = rows.first { $0.first == outcome.id }
                    #expect(row == [outcome.id!, operations[outcome.name]!, "backend", String(outcome.status), "success"], "\(outcome.name): \(String(describing: row))")
                }
                #expect(rows.count == answered.count, "rows of refused requests: \(rows.filter { refused.contains($0[0]) })")
            }
        } catch {
            await cluster.remove()
            throw error
        }
        await cluster.remove()
    }
}
