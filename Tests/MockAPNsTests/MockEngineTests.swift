import APNs
import MockAPNs
import RelayJSON
import TestSupport
import Testing
import RelayBasics

let now: Int64 = 1_700_000_000
let token64 = String(repeating: "0a", count: 32)
let bundle = "com.example.app"

/// A mock that knows one key (KEYID00001 of TEAMID0001) and one app.
struct MockFixture {
    let engine: MockAPNsEngine
    let validToken: String
    let signer: IndependentSigner

    init(configure: (inout MockAPNsConfiguration) -> Void = { _ in }) throws {
        signer = try IndependentSigner(claims: [
            ("KEYID00001", "TEAMID0001", now - 60),          // valid
            ("KEYID00001", "TEAMID0001", now - 3601),        // older than an hour
            ("KEYID00001", "OTHERTEAM1", now - 60),          // wrong team
            ("UNKNOWNKEY", "TEAMID0001", now - 60),          // unknown key id
        ])
        var configuration = MockAPNsConfiguration()
        configuration.keys = [.init(keyID: "KEYID00001", teamID: "TEAMID0001", publicKeyPEM: signer.publicKeyPEM)]
        configuration.bundleIDs = [bundle]
        configure(&configuration)
        engine = try MockAPNsEngine(configuration: configuration, now: { now })
        validToken = signer.tokens[0]
    }

    func send(
        path: String = "/3/device/\(token64)", method: String = "POST", headers: [HTTPHeader]? = nil,
        body: String = #"{"aps":{"alert":"hi"}}"#, authorization: String? = nil, connection: Int = 1
    ) -> MockAction {
        var all = [HTTPHeader("authorization", authorization ?? "bearer \(validToken)")]
        all += headers ?? [HTTPHeader("apns-push-type", "alert"), HTTPHeader("apns-topic", bundle)]
        return engine.handle(MockRequest(method: method, path: path, headers: all, body: Array(body.utf8), connectionID: connection))
    }
}

func answer(_ action: MockAction) -> (status: Int, reason: String?) {
    guard case .respond(let response, _) = action else { return (-1, "not a response: \(action)") }
    return (response.status, response.reason)
}

struct RejectCase: Sendable {
    let method: String
    let path: String
    let headers: [(String, String)]
    let reason: String
    init(_ method: String, _ path: String, _ headers: [(String, String)], _ reason: String) {
        self.method = method
        self.path = path
        self.headers = headers
        self.reason = reason
    }
}

let rejectCases: [RejectCase] = [
    RejectCase("POST", "/3/device/\(token64)", [("apns-topic", bundle)], "MissingPushType"),
    RejectCase("POST", "/3/device/\(token64)", [("apns-push-type", "alert")], "MissingTopic"),
    RejectCase("POST", "/3/device/\(token64)", [("apns-push-type", "bogus"), ("apns-topic", bundle)], "InvalidPushType"),
    RejectCase("POST", "/3/device/\(token64)", [("apns-push-type", "liveactivity"), ("apns-topic", bundle)], "TopicDisallowed"),
    RejectCase("POST", "/3/device/\(token64)", [("apns-push-type", "liveactivity"), ("apns-topic", bundle + ".push-type.liveactivity.push-type.liveactivity")], "TopicDisallowed"),
    RejectCase("POST", "/3/device/\(token64)", [("apns-push-type", "alert"), ("apns-topic", "com.other.app")], "TopicDisallowed"),
    RejectCase("POST", "/3/device/\(token64)", [("apns-push-type", "alert"), ("apns-topic", bundle), ("apns-priority", "7")], "BadPriority"),
    RejectCase("POST", "/3/device/\(token64)", [("apns-push-type", "alert"), ("apns-topic", bundle), ("apns-expiration", "soon")], "BadExpirationDate"),
    RejectCase("POST", "/3/device/\(token64)", [("apns-push-type", "alert"), ("apns-topic", bundle), ("apns-collapse-id", String(repeating: "c", count: 65))], "BadCollapseId"),
    RejectCase("POST", "/3/device/\(token64)", [("apns-push-type", "alert"), ("apns-topic", bundle), ("apns-id", "nope")], "BadMessageId"),
    RejectCase("POST", "/3/device/\(token64)", [("apns-push-type", "alert"), ("apns-topic", bundle), ("apns-topic", bundle)], "DuplicateHeaders"),
    RejectCase("POST", "/3/device/xyz", [("apns-push-type", "alert"), ("apns-topic", bundle)], "BadDeviceToken"),
    RejectCase("POST", "/3/device", [("apns-push-type", "alert"), ("apns-topic", bundle)], "MissingDeviceToken"),
    RejectCase("GET", "/3/device/\(token64)", [("apns-push-type", "alert"), ("apns-topic", bundle)], "MethodNotAllowed"),
    RejectCase("POST", "/2/device/\(token64)", [("apns-push-type", "alert"), ("apns-topic", bundle)], "BadPath"),
]

@Suite("Mock APNs: validation like APNs")
struct MockValidationTests {
    @Test("a valid alert gets 200 with apns-id echoed and an apns-unique-id")
    func success() throws {
        let mock = try MockFixture()
        let id = "7f1c8f0e-3d2b-4b7a-9c1d-2e3f4a5b6c7d"
        let action = mock.send(headers: [HTTPHeader("apns-push-type", "alert"), HTTPHeader("apns-topic", bundle), HTTPHeader("apns-id", id.uppercased())])
        guard case .respond(let response, _) = action else { Issue.record("no response"); return }
        #expect(response.status == 200)
        #expect(response.headers.first(where: { $0.name == "apns-id" })?.value == id)
        #expect(APNsID(response.headers.first(where: { $0.name == "apns-unique-id" })?.value ?? "") != nil)
        #expect(mock.engine.log.total == 1)
    }

    @Test("provider tokens: expired, wrong team, unknown key, bad signature, missing")
    func providerTokens() throws {
        let mock = try MockFixture()
        #expect(answer(mock.send(authorization: "bearer \(mock.signer.tokens[1])")) == (403, "ExpiredProviderToken"))
        #expect(answer(mock.send(authorization: "bearer \(mock.signer.tokens[2])")) == (403, "InvalidProviderToken"))
        #expect(answer(mock.send(authorization: "bearer \(mock.signer.tokens[3])")) == (403, "InvalidProviderToken"))
        // Change a character in the middle of the signature: every bit there is signature data
        // (the last base64url character also carries padding bits a decoder may ignore).
        var characters = Array(mock.validToken)
        let middle = characters.count - 20
        characters[middle] = characters[middle] == "A" ? "B" : "A"
        let tampered = String(characters)
        #expect(answer(mock.send(authorization: "bearer \(tampered)")) == (403, "InvalidProviderToken"))
        #expect(answer(mock.send(authorization: "")) == (403, "MissingProviderToken"))
    }

    @Test("each distinct JWT is verified once, not per request")
    func verifiesOnce() throws {
        let mock = try MockFixture()
        for _ in 0..<50 { #expect(answer(mock.send()).status == 200) }
        #expect(mock.engine.signatureVerifications == 1)
    }

    @Test("header and path rules answer the catalog's status and reason", arguments: rejectCases)
    func rejects(_ testCase: RejectCase) throws {
        let mock = try MockFixture()
        let headers = testCase.headers.map { HTTPHeader($0.0, $0.1) }
        let result = answer(mock.send(path: testCase.path, method: testCase.method, headers: headers))
        #expect(result.reason == testCase.reason, "\(testCase.path) \(testCase.headers)")
        #expect(result.status == APNsReason.named(testCase.reason)?.status)
    }

    @Test("payload limits: empty, 4096 ok, 4097 too large, 5120 for voip")
    func payloadLimits() throws {
        let mock = try MockFixture()
        #expect(answer(mock.send(body: "")) == (400, "PayloadEmpty"))
        #expect(answer(mock.send(body: String(repeating: " ", count: 4096))).status == 200)
        #expect(answer(mock.send(body: String(repeating: " ", count: 4097))) == (413, "PayloadTooLarge"))
        let voip = [HTTPHeader("apns-push-type", "voip"), HTTPHeader("apns-topic", bundle + ".voip")]
        #expect(answer(mock.send(headers: voip, body: String(repeating: " ", count: 5120))).status == 200)
    }
}

@Suite("Mock APNs: channels and broadcasts")
struct MockChannelTests {
    @Test("create, list, read, broadcast, delete; channels exist per environment")
    func lifecycle() throws {
        let mock = try MockFixture()
        guard case .respond(let created, _) = mock.send(
            path: "/1/apps/\(bundle)/channels", headers: [],
            body: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)
        else { Issue.record("no response"); return }
        #expect(created.status == 201)
        let channel = try #require(created.headers.first(where: { $0.name == "apns-channel-id" })?.value)
        #expect(mock.engine.channels(bundleID: bundle) == [channel])

        guard case .respond(let listed, _) = mock.send(path: "/1/apps/\(bundle)/all-channels", method: "GET", headers: [], body: "")
        else { Issue.record("no response"); return }
        #expect(try JSONParser.parse(listed.body) == ["channels": [.string(channel)]])

        let broadcastHeaders = { (expiration: String) in
            [HTTPHeader("apns-push-type", "liveactivity"), HTTPHeader("apns-channel-id", channel), HTTPHeader("apns-expiration", expiration)]
        }
        let path = "/4/broadcasts/apps/\(bundle)"
        #expect(answer(mock.send(path: path, headers: broadcastHeaders("0"))).status == 200)
        #expect(answer(mock.send(path: path, headers: broadcastHeaders("1700003600"))) == (400, "BadExpirationDate"))

        let otherEnvironment = try MockFixture { $0.environment = "production" }
        #expect(answer(otherEnvironment.send(path: path, headers: broadcastHeaders("0"))) == (404, "ChannelNotRegistered"))

        // Read: the channel's policy and push type, its id echoed.
        guard case .respond(let read, _) = mock.send(
            path: "/1/apps/\(bundle)/channels", method: "GET", headers: [HTTPHeader("apns-channel-id", channel)], body: "")
        else { Issue.record("no response"); return }
        #expect(read.status == 200)
        #expect(try JSONParser.parse(read.body) == ["message-storage-policy": 0, "push-type": "LiveActivity"])
        #expect(read.headers.first(where: { $0.name == "apns-channel-id" })?.value == channel)
        #expect(answer(mock.send(path: "/1/apps/\(bundle)/channels", method: "GET", headers: [], body: "")) == (400, "MissingChannelId"))
        #expect(answer(mock.send(path: "/1/apps/\(bundle)/channels", method: "GET", headers: [HTTPHeader("apns-channel-id", "dHJhaW4%3D")], body: "")) == (400, "BadChannelId"))
        #expect(answer(otherEnvironment.send(path: "/1/apps/\(bundle)/channels", method: "GET", headers: [HTTPHeader("apns-channel-id", channel)], body: "")) == (404, "ChannelNotRegistered"))
        #expect(answer(mock.send(path: "/1/apps/\(bundle)/channels", method: "PUT", headers: [], body: "")) == (405, "MethodNotAllowed"))

        let delete = [HTTPHeader("apns-channel-id", channel)]
        #expect(answer(mock.send(path: "/1/apps/\(bundle)/channels", method: "DELETE", headers: delete, body: "")).status == 204)
        #expect(answer(mock.send(path: "/1/apps/\(bundle)/channels", method: "DELETE", headers: delete, body: "")) == (404, "ChannelNotRegistered"))
    }

    @Test("broadcast rules: missing or altered channel id, wrong push type, feature off")
    func broadcastRules() throws {
        let mock = try MockFixture()
        mock.engine.registerChannel(bundleID: bundle, id: "dHJhaW4tY2hhbm5lbC0x", storagePolicy: 1)
        let path = "/4/broadcasts/apps/\(bundle)"
        #expect(answer(mock.send(path: path, headers: [HTTPHeader("apns-push-type", "liveactivity")])) == (400, "MissingChannelId"))
        #expect(answer(mock.send(path: path, headers: [HTTPHeader("apns-push-type", "liveactivity"), HTTPHeader("apns-channel-id", "dHJhaW4%3D")])) == (400, "BadChannelId"))
        #expect(answer(mock.send(path: path, headers: [HTTPHeader("apns-push-type", "alert"), HTTPHeader("apns-channel-id", "dHJhaW4tY2hhbm5lbC0x")])) == (400, "InvalidPushType"))
        #expect(answer(mock.send(path: path, headers: [HTTPHeader("apns-push-type", "liveactivity"), HTTPHeader("apns-channel-id", "dHJhaW4tY2hhbm5lbC0x"), HTTPHeader("apns-expiration", "1700003600")])).status == 200)
        let disabled = try MockFixture { $0.broadcastEnabled = false }
        #expect(answer(disabled.send(path: "/1/apps/\(bundle)/all-channels", method: "GET", headers: [], body: "")) == (400, "FeatureNotEnabled"))
    }
}

@Suite("Mock APNs: scripted behaviour")
struct MockScriptTests {
    @Test("a token prefix answers 410 Unregistered with a timestamp")
    func unregistered() throws {
        let mock = try MockFixture { $0.rules = [MockRule(.tokenPrefix("dead"), always: .unregistered(at: 1_699_999_999_000))] }
        guard case .respond(let response, _) = mock.send(path: "/3/device/dead" + String(repeating: "0", count: 60)) else {
            Issue.record("no response"); return
        }
        #expect(response.status == 410)
        #expect(try JSONParser.parse(response.body) == ["reason": "Unregistered", "timestamp": 1_699_999_999_000])
        #expect(answer(mock.send()).status == 200)
    }

    @Test("sequences advance per apns-id: two 503s, then 200, for each send")
    func sequences() throws {
        let mock = try MockFixture { $0.rules = [MockRule(.any, [.reject(reason: "ServiceUnavailable"), .reject(reason: "ServiceUnavailable"), .succeed])] }
        for id in ["11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"] {
            let headers = [HTTPHeader("apns-push-type", "alert"), HTTPHeader("apns-topic", bundle), HTTPHeader("apns-id", id)]
            #expect(answer(mock.send(headers: headers)) == (503, "ServiceUnavailable"))
            #expect(answer(mock.send(headers: headers)) == (503, "ServiceUnavailable"))
            #expect(answer(mock.send(headers: headers)).status == 200)
            #expect(answer(mock.send(headers: headers)).status == 200)
            #expect(mock.engine.log.attempts(apnsID: id).map(\.status) == [503, 503, 200, 200])
        }
        #expect(mock.engine.log.countsByReason == ["ServiceUnavailable": 4])
    }

    @Test("429 carries Retry-After; faults and delays become transport actions")
    func faults() throws {
        let mock = try MockFixture {
            $0.rules = [
                MockRule(.tokenPrefix("aa"), always: .tooManyRequests(retryAfterSeconds: 7)),
                MockRule(.tokenPrefix("bb"), always: .noAnswer),
                MockRule(.tokenPrefix("cc"), always: .resetConnection),
                MockRule(.tokenPrefix("dd"), always: .bareStatus(502)),
            ]
            $0.responseDelay = .fixed(milliseconds: 50)
        }
        let token = { (prefix: String) in "/3/device/" + prefix + String(repeating: "0", count: 62) }
        guard case .respond(let limited, let delay) = mock.send(path: token("aa")) else { Issue.record("no response"); return }
        #expect(limited.status == 429)
        #expect(limited.headers.contains(HTTPHeader("retry-after", "7")))
        #expect(delay == 50)
        #expect(mock.send(path: token("bb")) == .noAnswer)
        #expect(mock.send(path: token("cc")) == .resetConnection)
        #expect(answer(mock.send(path: token("dd"))) == (502, nil))
    }

    @Test("GOAWAY after N streams per connection")
    func goAway() throws {
        let mock = try MockFixture { $0.goAwayAfterStreams = (3, true) }
        #expect(answer(mock.send(connection: 1)).status == 200)
        #expect(answer(mock.send(connection: 1)).status == 200)
        guard case .goAway(true, let response?) = mock.send(connection: 1) else { Issue.record("expected graceful GOAWAY"); return }
        #expect(response.status == 200)
        #expect(answer(mock.send(connection: 2)).status == 200)
    }
}
