import Foundation
import HTTP2
import Ingress
import MockAPNs
import RelayBasics
import RelayJSON
import RelayServer
import Testing
import TestSupport

/// The HTTP/2 APNs ingress (`apns_ingress:`) with clients nobody here wrote:
/// aioapns (PyPI) over TLS, curl over TLS (ALPN h2) and with prior
/// knowledge over cleartext, nghttp. Each verdict compares what the mock
/// APNs received with what the client sent, and the audit row when a
/// database is given (APNS_RELAY_TEST_DATABASE_URL).
@Suite("HTTP/2 APNs ingress", .serialized)
struct APNsHTTP2IngressTests {
    static let providerKeyID = "BKEND12345"
    static let teamID = "BTEAM12345"
    static let deadPrefix = "dead"
    static let unregisteredAt: Int64 = 1_700_000_000_000

    /// The backend's own provider key (not the app's): a .p8 and its public PEM.
    struct BackendKey {
        let file: TestKeyFile
        let publicKeyPEM: String

        init() throws {
            file = try TestKeyFile()
            let (status, output) = try ProcessRunner.run(["openssl", "pkey", "-in", file.path, "-pubout"])
            guard status == 0 else { throw TestRelayError("openssl pkey -pubout: \(output)") }
            publicKeyPEM = output
        }

        /// A provider token signed with this key, as an APNs library makes one.
        func token(keyID: String = APNsHTTP2IngressTests.providerKeyID, issuer: String = APNsHTTP2IngressTests.teamID, issuedAt: Int64 = UnixTime.nowSeconds()) throws -> String {
            let script = #"""
            import sys, json, base64
            from cryptography.hazmat.primitives.asymmetric import ec, utils
            from cryptography.hazmat.primitives import hashes, serialization
            key = serialization.load_pem_private_key(open(sys.argv[1], "rb").read(), None)
            b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
            head = b64(json.dumps({"alg": "ES256", "kid": sys.argv[2]}).encode())
            body = b64(json.dumps({"iss": sys.argv[3], "iat": int(sys.argv[4])}).encode())
            r, s = utils.decode_dss_signature(key.sign(f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256())))
            print(f"{head}.{body}." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big")))
            """#
            let (status, output) = try ProcessRunner.run(["python3", "-c", script, file.path, keyID, issuer, String(issuedAt)])
            guard status == 0 else { throw TestRelayError("python3 cryptography: \(output)") }
            return output.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// A relay whose HTTP/2 APNs ingress is on (TLS unless `tls` is false),
    /// the `backend` API key (app-a only) naming `key` as its provider key.
    /// The mock answers tokens starting `dead` with 410, then `rules`.
    static func withIngress(
        key: BackendKey, tls: Bool = true, databaseURL: String? = nil, rules extraRules: [MockRule] = [],
        configure: @escaping (inout ServerConfiguration) -> Void = { _ in },
        _ body: (TestRelay, _ port: Int, _ caFile: String) async throws -> Void
    ) async throws {
        let directory = NSTemporaryDirectory() + "apns-relay-h2-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificate = try SelfSignedCertificate.generate(in: directory)
        let rules = [MockRule(.tokenPrefix(deadPrefix), always: .unregistered(at: unregisteredAt))] + extraRules
        try await withRelay(rules: rules, databaseURL: databaseURL, configure: { configuration in
            configuration.apnsIngress.listen = .init(host: "127.0.0.1", port: 0)
            configuration.apnsIngress.tls = tls
            configuration.apnsIngress.certificateFile = certificate.certificateFile
            configuration.apnsIngress.privateKeyFile = certificate.privateKeyFile
            let index = configuration.apiKeys.firstIndex { $0.name == "backend" }!
            configuration.apiKeys[index].providerKey = .init(keyID: providerKeyID, teamID: teamID, publicKeyPEM: key.publicKeyPEM)
            configure(&configuration)
        }) { relay in
            let port = Int(try #require(relay.server.apnsIngressAddress).port)
            try await body(relay, port, certificate.certificateFile)
        }
    }

    /// What the mock APNs received with `apns-id`.
    static func received(_ relay: TestRelay, apnsID: String) -> MockRequest? {
        relay.mock.engine.log.entries.first { $0.request.headers.value(of: "apns-id")?.lowercased() == apnsID.lowercased() }?.request
    }

    /// The audit row of `apnsID`: caller, status, reason, topic, push type, outcome.
    static func auditRow(_ url: String, apnsID: String) async throws -> [String]? {
        var row: [String]?
        _ = try await eventually(30) {
            row = try await OutcomeAgreementTests.psql(
                url, "SELECT caller, status, coalesce(reason, ''), topic, push_type, outcome FROM apns_audit WHERE apns_id = '\(apnsID.lowercased())'").first
            return row != nil
        }
        return row
    }

    @Test("aioapns, unmodified, sends alerts through the TLS listener with its own key and handles a 410 Unregistered")
    func aioapns() async throws {
        let key = try BackendKey()
        defer { key.file.remove() }
        let url = ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"]
        try await Self.withIngress(key: key, databaseURL: url) { relay, port, caFile in
            let good = TestRelay.token(7)
            let dead = Self.deadPrefix + String(TestRelay.token(8).dropFirst(4))
            let script = TraceExportProcessTests.root.appendingPathComponent("scripts/lib/aioapns_client.py").path
            let (status, output) = try await ProcessRunner.runOffPool([
                "python3", script, "--port", String(port), "--ca-file", caFile, "--key", key.file.path,
                "--key-id", Self.providerKeyID, "--team-id", Self.teamID, "--topic", "com.example.a", "--token", good, "--token", dead,
            ])
            #expect(status == 0, "aioapns client: \(output)")
            let results = output.split(separator: "\n").compactMap { try? JSONParser.parse(Array($0.utf8)) }
            try #require(results.count == 2, "aioapns printed: \(output)")

            // APNs' answers, as aioapns reads them.
            #expect(results[0]["status"]?.stringValue == "200")
            #expect(results[0]["successful"] == .bool(true))
            #expect(results[1]["status"]?.stringValue == "410")
            #expect(results[1]["reason"]?.stringValue == "Unregistered")
            #expect(results[1]["timestamp"]?.integerValue == Self.unregisteredAt)

            for (result, token) in zip(results, [good, dead]) {
                let apnsID = try #require(result["apns_id"]?.stringValue)
                // What APNs received is what aioapns sent: path, apns-* headers, payload bytes;
                // only authorization is the relay's own (the app's key, not the backend's).
                let request = try #require(Self.received(relay, apnsID: apnsID), "the mock never saw \(apnsID)")
                #expect(request.method == "POST")
                #expect(request.path == "/3/device/\(token)")
                #expect(request.headers.value(of: "apns-topic") == "com.example.a")
                #expect(request.headers.value(of: "apns-push-type") == "alert")
                let payload = try #require(result["payload"]?.stringValue)
                #expect(request.body == Array(payload.utf8), "payload bytes: sent \(payload), APNs got \(String(decoding: request.body, as: UTF8.self))")
                // The mock knows only the app's key (E2EKEY1234): its 200 and 410 say the relay signed with it.
                let authorization = try #require(request.headers.value(of: "authorization"))
                #expect(Self.keyID(ofBearer: authorization) == "E2EKEY1234")
                if let url {
                    let row = try #require(try await Self.auditRow(url, apnsID: apnsID), "no audit row for \(apnsID)")
                    #expect(row[0] == "backend")
                    #expect(row[1] == (token == good ? "200" : "410"))
                    #expect(row[2] == (token == good ? "" : "Unregistered"))
                    #expect(row[3] == "com.example.a")
                    #expect(row[4] == "alert")
                }
            }
            #expect(relay.mock.engine.log.total == 2)
        }
    }

    /// The `kid` of a `bearer <JWT>` header.
    static func keyID(ofBearer header: String) -> String? {
        guard let token = header.split(separator: " ").last, let first = token.split(separator: ".").first else { return nil }
        var text = first.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text), let json = try? JSONParser.parse(Array(data)) else { return nil }
        return json["kid"]?.stringValue
    }

    /// curl with HTTP/2 against the listener: `--http2` over TLS (ALPN) or
    /// `--http2-prior-knowledge` over cleartext.
    static func curl(
        port: Int, caFile: String?, token: String?, path: String, body: String, headers: [String] = []
    ) async throws -> TestRelay.Answer {
        var arguments = ["curl", "-s", "-S", "-i", "-X", "POST", "--max-time", "60"]
        arguments += caFile.map { ["--http2", "--cacert", $0] } ?? ["--http2-prior-knowledge"]
        if let token { arguments += ["-H", "authorization: bearer \(token)"] }
        for header in headers { arguments += ["-H", header] }
        arguments += ["--data-binary", "@-", (caFile == nil ? "http" : "https") + "://127.0.0.1:\(port)\(path)"]
        let (status, output) = try await ProcessRunner.runOffPool(arguments, input: Data(body.utf8))
        guard status == 0 else { throw TestRelayError("curl failed (\(status)): \(output)") }
        return try TestRelay.parse(output)
    }

    @Test("curl --http2 over TLS and --http2-prior-knowledge over cleartext: APNs' answers, the headers and payload reach APNs unchanged")
    func curlBothListeners() async throws {
        let key = try BackendKey()
        defer { key.file.remove() }
        for tls in [true, false] {
            try await Self.withIngress(key: key, tls: tls) { relay, port, caFile in
                let token = try key.token()
                let apnsID = UUID().uuidString.lowercased()
                let payload = #"{"aps":{"alert":"hi","badge":3},"k":[1,2]}"#
                let headers = ["apns-topic: com.example.a", "apns-push-type: alert", "apns-id: \(apnsID)", "apns-priority: 5", "apns-expiration: 0", "apns-collapse-id: c1"]
                let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
                let answer = try await Self.curl(
                    port: port, caFile: tls ? caFile : nil, token: token, path: "/3/device/\(TestRelay.token(3))", body: payload,
                    headers: headers + ["traceparent: 00-\(traceID)-00f067aa0ba902b7-01"])
                #expect(answer.status == 200, "\(answer)")
                #expect(answer.headers["apns-id"] == apnsID)
                // The caller's trace goes on: the answer's traceparent is in the same trace.
                #expect(answer.headers["traceparent"]?.split(separator: "-").dropFirst().first.map(String.init) == traceID, "\(answer.headers)")
                // Counted apart from the HTTP/1.1 listener's /3/device/{token}.
                let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase)
                #expect(scrape.body.split(separator: "\n").contains { $0.hasPrefix("apns_relay_ingress_requests_total{") && $0.contains(#"route="h2:/3/device/{token}""#) && $0.contains(#"code="200""#) }, "\(scrape.body.prefix(4000))")
                let request = try #require(Self.received(relay, apnsID: apnsID))
                for header in headers {
                    let parts = header.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                    #expect(request.headers.value(of: parts[0]) == parts[1], "\(parts[0]) at APNs")
                }
                #expect(request.body == Array(payload.utf8))

                // The relay's own refusals, in APNs' words, and nothing sent.
                let before = relay.mock.engine.log.total
                let missing = try await Self.curl(port: port, caFile: tls ? caFile : nil, token: nil, path: "/3/device/\(TestRelay.token(3))", body: payload, headers: headers)
                #expect(missing.status == 403 && missing.json?["reason"]?.stringValue == "MissingProviderToken", "\(missing)")
                let expired = try await Self.curl(
                    port: port, caFile: tls ? caFile : nil, token: try key.token(issuedAt: UnixTime.nowSeconds() - 7200), path: "/3/device/\(TestRelay.token(3))", body: payload, headers: headers)
                #expect(expired.status == 403 && expired.json?["reason"]?.stringValue == "ExpiredProviderToken", "\(expired)")
                let wrongTeam = try await Self.curl(
                    port: port, caFile: tls ? caFile : nil, token: try key.token(issuer: "OTHERTEAM1"), path: "/3/device/\(TestRelay.token(3))", body: payload, headers: headers)
                #expect(wrongTeam.status == 403 && wrongTeam.json?["reason"]?.stringValue == "InvalidProviderToken", "\(wrongTeam)")
                // app-b's topic: the key may use app-a only; never another app's.
                let otherApp = try await Self.curl(
                    port: port, caFile: tls ? caFile : nil, token: token, path: "/3/device/\(TestRelay.token(3))", body: payload,
                    headers: ["apns-topic: com.example.b", "apns-push-type: alert"])
                #expect(otherApp.status == 403 && otherApp.json?["reason"]?.stringValue == "TopicDisallowed", "\(otherApp)")
                let badToken = try await Self.curl(port: port, caFile: tls ? caFile : nil, token: token, path: "/3/device/xyz", body: payload, headers: headers)
                #expect(badToken.status == 400 && badToken.json?["reason"]?.stringValue == "BadDeviceToken", "\(badToken)")
                let large = try await Self.curl(
                    port: port, caFile: tls ? caFile : nil, token: token, path: "/3/device/\(TestRelay.token(3))",
                    body: #"{"aps":{"alert":""# + String(repeating: "x", count: 20_000) + #""}}"#, headers: ["apns-topic: com.example.a"])
                #expect(large.status == 413 && large.json?["reason"]?.stringValue == "PayloadTooLarge", "\(large)")
                #expect(relay.mock.engine.log.total == before, "a refused request reached APNs")
            }
        }
    }

    @Test("nghttp against the cleartext listener")
    func nghttpCleartext() async throws {
        let key = try BackendKey()
        defer { key.file.remove() }
        try await Self.withIngress(key: key, tls: false) { relay, port, _ in
            let directory = NSTemporaryDirectory() + "nghttp-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let payload = #"{"aps":{"alert":"from nghttp"}}"#
            FileManager.default.createFile(atPath: directory + "/body.json", contents: Data(payload.utf8))
            let apnsID = UUID().uuidString.lowercased()
            let (status, output) = try await ProcessRunner.runOffPool([
                "nghttp", "-v", "-d", directory + "/body.json", "-H", "authorization: bearer \(try key.token())",
                "-H", "apns-topic: com.example.a", "-H", "apns-id: \(apnsID)", "-H", "apns-push-type: alert",
                "http://127.0.0.1:\(port)/3/device/\(TestRelay.token(5))",
            ])
            #expect(status == 0, "\(output)")
            #expect(output.contains(":status: 200"), "\(output)")
            let request = try #require(Self.received(relay, apnsID: apnsID))
            #expect(request.body == Array(payload.utf8))
        }
    }

    /// Runs scripts/lib/h2_hostile.py against a cleartext listener; its one JSON line.
    static func hostile(port: Int, _ arguments: [String]) async throws -> JSONValue {
        let script = TraceExportProcessTests.root.appendingPathComponent("scripts/lib/h2_hostile.py").path
        let (status, output) = try await ProcessRunner.runOffPool(["python3", script, "--port", String(port)] + arguments)
        guard status == 0, let line = output.split(separator: "\n").last, let json = try? JSONParser.parse(Array(line.utf8)) else {
            throw TestRelayError("h2_hostile.py \(arguments): \(output)")
        }
        return json
    }

    /// After an attack the listener still serves an honest client.
    static func expectServes(_ relay: TestRelay, port: Int, key: BackendKey) async throws {
        let apnsID = UUID().uuidString.lowercased()
        let answer = try await curl(
            port: port, caFile: nil, token: try key.token(), path: "/3/device/\(TestRelay.token(9))", body: #"{"aps":{"alert":"still here"}}"#,
            headers: ["apns-topic: com.example.a", "apns-id: \(apnsID)"])
        #expect(answer.status == 200, "\(answer)")
        #expect(received(relay, apnsID: apnsID) != nil)
    }

    @Test("rapid reset (CVE-2023-44487): the connection is closed with GOAWAY long before the client's 20000 HEADERS+RST_STREAM pairs, nothing reaches APNs")
    func rapidReset() async throws {
        let key = try BackendKey()
        defer { key.file.remove() }
        try await Self.withIngress(key: key, tls: false) { relay, port, _ in
            let result = try await Self.hostile(port: port, ["--authorization", "bearer \(try key.token())", "rapid-reset", "20000"])
            #expect(result["closed"] == .bool(true), "\(result)")
            // libnghttp2's stream-reset rate limit (1.57, backported into Debian's 1.52.0-1+deb12u1:
            // a burst of 1000, then 33 a second) ends the session with GOAWAY INTERNAL_ERROR (2).
            #expect(result["goaway_error"]?.integerValue == 2, "\(result)")
            #expect((result["pairs_written"]?.integerValue ?? .max) < 20000, "\(result)")
            #expect(relay.mock.engine.log.total == 0)
            try await Self.expectServes(relay, port: port, key: key)
        }
    }

    @Test("CONTINUATION flood (CVE-2024-28182) and an oversized header block: refused without handling the request")
    func continuationFlood() async throws {
        let key = try BackendKey()
        defer { key.file.remove() }
        try await Self.withIngress(key: key, tls: false) { relay, port, _ in
            let result = try await Self.hostile(port: port, ["--authorization", "bearer \(try key.token())", "continuation", "10000"])
            let refused = result["goaway_error"] != .null && result["goaway_error"] != nil || result["closed"] == .bool(true)
            #expect(refused, "\(result)")
            #expect((result["continuations_sent"]?.integerValue ?? .max) < 10000, "\(result)")
            #expect(result["answered"]?.integerValue == 0, "\(result)")
            #expect(relay.mock.engine.log.total == 0)
            try await Self.expectServes(relay, port: port, key: key)
        }
    }

    @Test("a stream whose request never completes is reset at the request time limit")
    func trickle() async throws {
        let key = try BackendKey()
        defer { key.file.remove() }
        try await Self.withIngress(key: key, tls: false, configure: { $0.apnsIngress.requestTimeoutSeconds = 1 }) { relay, port, _ in
            let result = try await Self.hostile(port: port, ["--authorization", "bearer \(try key.token())", "--wait", "60", "trickle"])
            let resets = try #require(result["resets"]?.arrayValue, "\(result)")
            #expect(resets.first?.arrayValue?.first?.integerValue == 1, "\(result)")
            #expect(relay.mock.engine.log.total == 0)
        }
    }

    @Test("connections from one address beyond max_connections_per_client are closed at accept; the first ones are served")
    func connectionCap() async throws {
        let key = try BackendKey()
        defer { key.file.remove() }
        try await Self.withIngress(key: key, tls: false, configure: { $0.apnsIngress.maximumConnectionsPerClient = 3 }) { relay, port, _ in
            let result = try await Self.hostile(port: port, ["connections", "8"])
            #expect(result["answered"]?.integerValue == 3, "\(result)")
            #expect(result["refused"]?.integerValue == 5, "\(result)")
            // Counted under their reason, the others at 0.
            let scrape = try await relay.curl("GET", "/metrics", key: nil, base: relay.metricsBase)
            let refused = OutcomeAgreementTests.sums(scrape.body, "apns_relay_apns_ingress_connections_refused_total", by: "reason")
            #expect(
                refused == ["max_connections_per_client": 5, "max_connections": 0, "descriptors": 0, "threads": 0, "stopping": 0], "\(refused)")
            // Those closed, the cap has room again.
            try await Self.expectServes(relay, port: port, key: key)
        }
    }

    @Test("the key's rate limit is APNs' 429 TooManyRequests with retry-after, and nothing is sent")
    func rateLimit() async throws {
        let key = try BackendKey()
        defer { key.file.remove() }
        // The limited key (app-a, burst 2, one token per 1000 s) names this provider key instead of backend.
        try await Self.withIngress(key: key, tls: false, configure: { configuration in
            let backend = configuration.apiKeys.firstIndex { $0.name == "backend" }!
            let limited = configuration.apiKeys.firstIndex { $0.name == "limited" }!
            configuration.apiKeys[limited].providerKey = configuration.apiKeys[backend].providerKey
            configuration.apiKeys[backend].providerKey = nil
        }) { relay, port, _ in
            let token = try key.token()
            var statuses: [Int] = []
            var last: TestRelay.Answer?
            for _ in 0..<3 {
                let answer = try await Self.curl(
                    port: port, caFile: nil, token: token, path: "/3/device/\(TestRelay.token(4))", body: #"{"aps":{"alert":"x"}}"#,
                    headers: ["apns-topic: com.example.a"])
                statuses.append(answer.status)
                last = answer
            }
            #expect(statuses == [200, 200, 429], "\(statuses)")
            #expect(last?.json?["reason"]?.stringValue == "TooManyRequests", "\(String(describing: last))")
            #expect(last?.headers["retry-after"] != nil)
            #expect(relay.mock.engine.log.total == 2)
        }
    }
}
