import Foundation
import MockAPNs
import RelayBasics
import RelayJSON
import Testing
import TestSupport

/// APNs' channel (create, list, delete) and broadcast requests on the HTTP/2
/// APNs ingress, made with httpx (PyPI, `httpx[http2]`) over TLS (ALPN h2)
/// and over cleartext HTTP/2. Each verdict compares what the mock APNs
/// received with what httpx sent (method, path, every `apns-*` header,
/// the body byte for byte; only `authorization` is the relay's), what the
/// client got back with what APNs answered, and the audit row when a
/// database is given (APNS_RELAY_TEST_DATABASE_URL).
@Suite("HTTP/2 APNs ingress: channels and broadcasts", .serialized)
struct APNsHTTP2ChannelTests {
    /// What httpx sent and got back (scripts/lib/httpx_apns_client.py).
    struct Exchange: CustomStringConvertible {
        let json: JSONValue
        var status: Int { Int(json["status"]?.integerValue ?? -1) }
        var httpVersion: String? { json["http_version"]?.stringValue }
        var body: String { json["body"]?.stringValue ?? "" }
        var sentBody: String { json["sent"]?["body"]?.stringValue ?? "" }
        var reason: String? { (try? JSONParser.parse(Array(body.utf8)))?["reason"]?.stringValue }
        /// The `apns-*` headers httpx put on the wire, in its order.
        var sentAPNsHeaders: [HTTPHeader] { Self.pairs(json["sent"]?["headers"]).filter { $0.name.hasPrefix("apns-") } }
        func header(_ name: String) -> String? { Self.pairs(json["headers"]).value(of: name) }
        var description: String { json.encodedString() }

        static func pairs(_ value: JSONValue?) -> [HTTPHeader] {
            (value?.arrayValue ?? []).compactMap { pair in
                guard let name = pair.arrayValue?.first?.stringValue, let value = pair.arrayValue?.last?.stringValue else { return nil }
                return HTTPHeader(name, value)
            }
        }
    }

    /// One request with httpx: TLS trusting `caFile`, or cleartext h2 with prior knowledge when it is nil.
    static func httpx(port: Int, caFile: String?, _ method: String, _ path: String, _ headers: [String], body: String? = nil) async throws -> Exchange {
        let script = TraceExportProcessTests.root.appendingPathComponent("scripts/lib/httpx_apns_client.py").path
        var arguments = ["python3", script, "--port", String(port), "--method", method, "--path", path]
        if let caFile { arguments += ["--ca-file", caFile] }
        for header in headers { arguments += ["--header", header] }
        if let body { arguments += ["--body", body] }
        let (status, output) = try await ProcessRunner.runOffPool(arguments)
        guard status == 0, let line = output.split(separator: "\n").last, let json = try? JSONParser.parse(Array(line.utf8)) else {
            throw TestRelayError("httpx_apns_client.py \(method) \(path): \(output)")
        }
        return Exchange(json: json)
    }

    /// What the mock APNs received with `apns-request-id: requestID`.
    static func received(_ relay: TestRelay, requestID: String) -> MockRequest? {
        relay.mock.engine.log.entries.first { $0.request.headers.value(of: "apns-request-id") == requestID }?.request
    }

    /// APNs received what httpx sent: method, path, the `apns-*` headers in
    /// order (plus the `apns-request-id` the relay adds when the client sent
    /// none, the one answered), the body byte for byte; `authorization` the
    /// relay's own, signed with the app's key (the mock knows no other).
    static func expectForwarded(_ relay: TestRelay, _ exchange: Exchange, method: String, path: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let requestID = try #require(exchange.header("apns-request-id"), "no apns-request-id answered: \(exchange)", sourceLocation: sourceLocation)
        let request = try #require(received(relay, requestID: requestID), "APNs never saw \(requestID)", sourceLocation: sourceLocation)
        #expect(request.method == method && request.path == path, "\(request.method) \(request.path)", sourceLocation: sourceLocation)
        var expected = exchange.sentAPNsHeaders
        if expected.value(of: "apns-request-id") == nil { expected.append(HTTPHeader("apns-request-id", requestID)) }
        let atAPNs = request.headers.filter { $0.name.hasPrefix("apns-") }
        #expect(atAPNs == expected, "apns-* headers: sent \(expected), APNs got \(atAPNs)", sourceLocation: sourceLocation)
        #expect(request.body == Array(exchange.sentBody.utf8), "body: sent \(exchange.sentBody), APNs got \(String(decoding: request.body, as: UTF8.self))", sourceLocation: sourceLocation)
        let authorization = try #require(request.headers.value(of: "authorization"), sourceLocation: sourceLocation)
        #expect(APNsHTTP2IngressTests.keyID(ofBearer: authorization) == "E2EKEY1234", sourceLocation: sourceLocation)
    }

    /// The audit row of `apnsID`: operation, caller, status, reason, channel id, outcome.
    static func auditRow(_ url: String, apnsID: String) async throws -> [String]? {
        var row: [String]?
        _ = try await eventually(30) {
            row = try await OutcomeAgreementTests.psql(
                url, "SELECT operation, caller, status, coalesce(reason, ''), coalesce(channel_id, ''), outcome FROM apns_audit WHERE apns_id = '\(apnsID)'").first
            return row != nil
        }
        return row
    }

    @Test("httpx over TLS and cleartext h2: channel create, list, read, broadcast and delete reach APNs as sent, APNs' answers come back, one audit row each")
    func channelsAndBroadcast() async throws {
        let key = try APNsHTTP2IngressTests.BackendKey()
        defer { key.file.remove() }
        let url = ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"]
        for tls in [true, false] {
            try await APNsHTTP2IngressTests.withIngress(key: key, tls: tls, databaseURL: url) { relay, port, certificate in
                let caFile = tls ? certificate : nil
                let auth = "authorization: bearer \(try key.token())"
                let expectedVersion = "HTTP/2"

                // Create: APNs' body as the client spaced it, its own request id.
                let createID = UUID().uuidString.lowercased()
                let created = try await Self.httpx(
                    port: port, caFile: caFile, "POST", "/1/apps/com.example.a/channels", [auth, "apns-request-id: \(createID)"],
                    body: #"{ "message-storage-policy" : 1, "push-type": "LiveActivity" }"#)
                #expect(created.status == 201, "\(created)")
                #expect(created.httpVersion == expectedVersion)
                #expect(created.header("apns-request-id") == createID)
                let channelID = try #require(created.header("apns-channel-id"), "\(created)")
                try Self.expectForwarded(relay, created, method: "POST", path: "/1/apps/com.example.a/channels")
                #expect(relay.mock.engine.channels(bundleID: "com.example.a").contains(channelID))

                // List, with no request id of the client's: the relay names it, and answers with it.
                let listed = try await Self.httpx(port: port, caFile: caFile, "GET", "/1/apps/com.example.a/all-channels", [auth])
                #expect(listed.status == 200, "\(listed)")
                let channels = try JSONParser.parse(Array(listed.body.utf8))["channels"]?.arrayValue ?? []
                #expect(channels.contains(.string(channelID)), "\(listed)")
                #expect(listed.header("content-type") == "application/json")
                try Self.expectForwarded(relay, listed, method: "GET", path: "/1/apps/com.example.a/all-channels")

                // Read it: APNs' GET …/channels naming it, its policy and push type back as APNs wrote them.
                let readID = UUID().uuidString.lowercased()
                let read = try await Self.httpx(
                    port: port, caFile: caFile, "GET", "/1/apps/com.example.a/channels", [auth, "apns-channel-id: \(channelID)", "apns-request-id: \(readID)"])
                #expect(read.status == 200, "\(read)")
                #expect(read.header("apns-request-id") == readID && read.header("apns-channel-id") == channelID, "\(read)")
                #expect(read.header("content-type") == "application/json")
                #expect(try JSONParser.parse(Array(read.body.utf8)) == ["message-storage-policy": 1, "push-type": "LiveActivity"], "\(read)")
                try Self.expectForwarded(relay, read, method: "GET", path: "/1/apps/com.example.a/channels")

                // Broadcast on it, with the caller's trace.
                let broadcastID = UUID().uuidString.lowercased()
                let traceID = "5bf92f3577b34da6a3ce929d0e0e4736"
                let payload = #"{"aps":{"timestamp":1763744531,"event":"update","content-state":{"progress":0.5,"label":"ünïcode"}},"x":[1,2]}"#
                let broadcast = try await Self.httpx(
                    port: port, caFile: caFile, "POST", "/4/broadcasts/apps/com.example.a",
                    [auth, "apns-channel-id: \(channelID)", "apns-push-type: liveactivity", "apns-priority: 10", "apns-expiration: 0",
                     "apns-request-id: \(broadcastID)", "traceparent: 00-\(traceID)-00f067aa0ba902b7-01"],
                    body: payload)
                #expect(broadcast.status == 200, "\(broadcast)")
                #expect(broadcast.header("apns-request-id") == broadcastID)
                #expect(broadcast.header("traceparent")?.split(separator: "-").dropFirst().first.map(String.init) == traceID, "\(broadcast)")
                try Self.expectForwarded(relay, broadcast, method: "POST", path: "/4/broadcasts/apps/com.example.a")

                // Delete it: APNs' 204, nothing in the body.
                let deleteID = UUID().uuidString.lowercased()
                let deleted = try await Self.httpx(
                    port: port, caFile: caFile, "DELETE", "/1/apps/com.example.a/channels",
                    [auth, "apns-channel-id: \(channelID)", "apns-request-id: \(deleteID)"])
                #expect(deleted.status == 204, "\(deleted)")
                #expect(deleted.body.isEmpty)
                #expect(deleted.header("apns-request-id") == deleteID)
                try Self.expectForwarded(relay, deleted, method: "DELETE", path: "/1/apps/com.example.a/channels")
                #expect(!relay.mock.engine.channels(bundleID: "com.example.a").contains(channelID))
                #expect(relay.mock.engine.log.total == 5)

                // One audit row each, as the HTTP/1.1 channel routes and broadcasts write them.
                if let url {
                    let listID = try #require(listed.header("apns-request-id"))
                    let expected: [(String, [String])] = [
                        (createID, ["channel_create", "backend", "201", "", "", "success"]),
                        (listID, ["channel_list", "backend", "200", "", "", "success"]),
                        (readID, ["channel_read", "backend", "200", "", channelID, "success"]),
                        (broadcastID, ["broadcast", "backend", "200", "", channelID, "success"]),
                        (deleteID, ["channel_delete", "backend", "204", "", channelID, "success"]),
                    ]
                    for (apnsID, columns) in expected {
                        let row = try await Self.auditRow(url, apnsID: apnsID)
                        #expect(row == columns, "audit row of \(apnsID): \(String(describing: row))")
                    }
                }

                // Counted under the listener's own routes.
                let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase)
                for (route, code) in [("h2:/1/apps/{bundle}/channels", 201), ("h2:/1/apps/{bundle}/channels", 200), ("h2:/1/apps/{bundle}/all-channels", 200), ("h2:/4/broadcasts/apps/{bundle}", 200), ("h2:/1/apps/{bundle}/channels", 204)] {
                    #expect(scrape.body.split(separator: "\n").contains { $0.hasPrefix("apns_relay_ingress_requests_total{") && $0.contains(#"route="\#(route)""#) && $0.contains(#"code="\#(code)""#) }, "\(route) \(code)")
                }
            }
        }
    }

    @Test("refusals in APNs' words over TLS and cleartext h2, none reaching APNs: another app's bundle id, no provider token, a bad or missing channel id (a read too), a bad create body, a method APNs does not serve on the path")
    func refusals() async throws {
        let key = try APNsHTTP2IngressTests.BackendKey()
        defer { key.file.remove() }
        for tls in [true, false] {
            try await APNsHTTP2IngressTests.withIngress(key: key, tls: tls) { relay, port, certificate in
                let caFile = tls ? certificate : nil
                let auth = "authorization: bearer \(try key.token())"
                let createBody = #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#
                let update = #"{"aps":{"timestamp":1763744531,"event":"update","content-state":{}}}"#
                let cases: [(String, String, [String], String?, Int, String)] = [
                    // app-b's bundle id: the backend key may use app-a only; a bundle id nobody configured alike.
                    ("POST", "/1/apps/com.example.b/channels", [auth], createBody, 403, "TopicDisallowed"),
                    ("GET", "/1/apps/com.example.b/all-channels", [auth], nil, 403, "TopicDisallowed"),
                    ("POST", "/4/broadcasts/apps/com.example.unknown", [auth, "apns-channel-id: AAAAAAAAAAAAAAAAAAAAAAAA", "apns-push-type: liveactivity"], update, 403, "TopicDisallowed"),
                    ("POST", "/1/apps/com.example.a/channels", [], createBody, 403, "MissingProviderToken"),
                    ("DELETE", "/1/apps/com.example.a/channels", [auth, "apns-channel-id: not*base64"], nil, 400, "BadChannelId"),
                    ("DELETE", "/1/apps/com.example.a/channels", [auth], nil, 400, "MissingChannelId"),
                    ("POST", "/4/broadcasts/apps/com.example.a", [auth, "apns-channel-id: AAAA=AAA", "apns-push-type: liveactivity"], update, 400, "BadChannelId"),
                    ("POST", "/4/broadcasts/apps/com.example.a", [auth, "apns-channel-id: AAAAAAAAAAAAAAAAAAAAAAAA", "apns-push-type: alert"], update, 400, "InvalidPushType"),
                    ("POST", "/1/apps/com.example.a/channels", [auth], #"{"message-storage-policy":7,"push-type":"LiveActivity"}"#, 400, "InvalidPayload"),
                    ("GET", "/1/apps/com.example.a/channels", [auth], nil, 400, "MissingChannelId"),
                    ("GET", "/1/apps/com.example.a/channels", [auth, "apns-channel-id: AAAA*AAA"], nil, 400, "BadChannelId"),
                    ("GET", "/1/apps/com.example.b/channels", [auth, "apns-channel-id: AAAAAAAAAAAAAAAAAAAAAAAA"], nil, 403, "TopicDisallowed"),
                    ("PUT", "/1/apps/com.example.a/channels", [auth], nil, 405, "MethodNotAllowed"),
                    ("DELETE", "/1/apps/com.example.a/all-channels", [auth], nil, 405, "MethodNotAllowed"),
                    ("GET", "/4/broadcasts/apps/com.example.a", [auth], nil, 405, "MethodNotAllowed"),
                ]
                for (method, path, headers, body, status, reason) in cases {
                    let answer = try await Self.httpx(port: port, caFile: caFile, method, path, headers, body: body)
                    #expect(answer.status == status && answer.reason == reason, "\(method) \(path) \(headers.filter { !$0.hasPrefix("authorization") }): \(answer)")
                }
                #expect(relay.mock.engine.log.total == 0, "a refused request reached APNs")
            }
        }
    }

    @Test("with the audit database, a create's or a broadcast's apns-request-id is its idempotency key: the client's retry is answered from the first, APNs sees it once, one audit row",
          .enabled(if: ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"] != nil))
    func retriesSentOnce() async throws {
        let key = try APNsHTTP2IngressTests.BackendKey()
        defer { key.file.remove() }
        let url = try #require(ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"])
        try await APNsHTTP2IngressTests.withIngress(key: key, tls: false, databaseURL: url) { relay, port, _ in
            let auth = "authorization: bearer \(try key.token())"
            let createID = UUID().uuidString.lowercased()
            let createBody = #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#
            let first = try await Self.httpx(port: port, caFile: nil, "POST", "/1/apps/com.example.a/channels", [auth, "apns-request-id: \(createID)"], body: createBody)
            let retry = try await Self.httpx(port: port, caFile: nil, "POST", "/1/apps/com.example.a/channels", [auth, "apns-request-id: \(createID)"], body: createBody)
            #expect(first.status == 201 && retry.status == 201, "\(first) \(retry)")
            let channelID = try #require(first.header("apns-channel-id"))
            #expect(retry.header("apns-channel-id") == channelID && retry.header("apns-request-id") == createID)
            #expect(retry.header("idempotency-replayed") == "true" && first.header("idempotency-replayed") == nil)
            #expect(relay.mock.engine.channels(bundleID: "com.example.a") == [channelID], "one channel made")

            let broadcastID = UUID().uuidString.lowercased()
            let headers = [auth, "apns-channel-id: \(channelID)", "apns-push-type: liveactivity", "apns-request-id: \(broadcastID)"]
            let payload = #"{"aps":{"event":"update","content-state":{"n":1},"timestamp":1763744531}}"#
            let sent = try await Self.httpx(port: port, caFile: nil, "POST", "/4/broadcasts/apps/com.example.a", headers, body: payload)
            let again = try await Self.httpx(port: port, caFile: nil, "POST", "/4/broadcasts/apps/com.example.a", headers, body: payload)
            #expect(sent.status == 200 && again.status == 200, "\(sent) \(again)")
            #expect(again.header("idempotency-replayed") == "true" && again.header("apns-request-id") == broadcastID)
            // The same id with another payload is another request: refused, nothing sent.
            let other = try await Self.httpx(port: port, caFile: nil, "POST", "/4/broadcasts/apps/com.example.a", headers, body: payload.replacingOccurrences(of: "1}", with: "2}"))
            #expect(other.status == 400 && other.reason == "BadMessageId" && other.header("apns-request-id") == broadcastID, "\(other)")

            for id in [createID, broadcastID] {
                #expect(relay.mock.engine.log.entries.filter { $0.request.headers.value(of: "apns-request-id") == id }.count == 1, "APNs saw \(id) once")
                _ = try await Self.auditRow(url, apnsID: id)
                let rows = try await OutcomeAgreementTests.psql(url, "SELECT count(*) FROM apns_audit WHERE apns_id = '\(id)'")
                #expect(rows.first?.first == "1", "audit rows of \(id): \(rows)")
            }
            #expect(relay.mock.engine.log.total == 2)
        }
    }
}
