import APNs
import RelayJSON
import Testing
import RelayBasics

/// One bad input, and the error preflight must answer with.
struct PreflightCase: Sendable, CustomTestStringConvertible {
    let name: String
    let code: String
    let field: String
    let trap: TrapID?
    let status: Int
    let attempt: @Sendable () throws -> Void

    var testDescription: String { name }
}

private let state: JSONValue = ["title": "t"]
private let bigText = String(repeating: "x", count: 4100)

let preflightCases: [PreflightCase] = [
    .init(name: "token with a non-hex character", code: "BadDeviceToken", field: "token", trap: .tokenEnvironmentMismatch, status: 400) {
        _ = try fixedBuilder().alert(token: String(repeating: "z", count: 64), payload: ["aps": [:]])
    },
    .init(name: "token of odd length", code: "BadDeviceToken", field: "token", trap: .tokenEnvironmentMismatch, status: 400) {
        _ = try fixedBuilder().alert(token: String(repeating: "a", count: 63), payload: ["aps": [:]])
    },
    .init(name: "token too short", code: "BadDeviceToken", field: "token", trap: .tokenEnvironmentMismatch, status: 400) {
        _ = try fixedBuilder().alert(token: "abcd", payload: ["aps": [:]])
    },
    .init(name: "alert payload over 4096 bytes", code: "PayloadTooLarge", field: "payload", trap: .payloadTooLarge, status: 413) {
        _ = try fixedBuilder().alert(token: deviceToken, payload: ["aps": ["alert": .string(bigText)]])
    },
    .init(name: "broadcast payload over 5120 bytes", code: "PayloadTooLarge", field: "payload", trap: .payloadTooLarge, status: 413) {
        _ = try fixedBuilder().broadcast(channelID: channel, content: .init(contentState: ["t": .string(bigText + bigText)]))
    },
    .init(name: "collapse id over 64 bytes", code: "BadCollapseId", field: "collapseId", trap: nil, status: 400) {
        _ = try fixedBuilder().alert(token: deviceToken, payload: ["aps": [:]], options: .init(collapseID: String(repeating: "é", count: 33)))
    },
    .init(name: "priority 7 in a raw header", code: "BadPriority", field: "apns-priority", trap: nil, status: 400) {
        _ = try fixedBuilder().raw(token: deviceToken, payload: ["aps": [:]], headers: [HTTPHeader("apns-push-type", "alert"), HTTPHeader("apns-priority", "7")])
    },
    .init(name: "background at priority 10", code: "BadPriority", field: "priority", trap: nil, status: 400) {
        _ = try fixedBuilder().background(token: deviceToken, options: .init(priority: .immediate))
    },
    .init(name: "stale date in milliseconds", code: "BadDate", field: "aps.stale-date", trap: .badDate, status: 400) {
        _ = try fixedBuilder().liveActivity(.update, token: deviceToken, content: .init(contentState: state, staleDate: 1_700_000_000_000))
    },
    .init(name: "negative dismissal date", code: "BadDate", field: "aps.dismissal-date", trap: .badDate, status: 400) {
        _ = try fixedBuilder().liveActivity(.end, token: deviceToken, content: .init(dismissalDate: -5))
    },
    .init(name: "expiration in milliseconds", code: "BadExpirationDate", field: "expiration", trap: .badDate, status: 400) {
        _ = try fixedBuilder().alert(token: deviceToken, payload: ["aps": [:]], options: .init(expiration: 1_700_000_000_000))
    },
    .init(name: "nonzero expiration on a no-storage broadcast", code: "BadExpirationDate", field: "expiration", trap: .badDate, status: 400) {
        _ = try fixedBuilder().broadcast(channelID: channel, content: .init(contentState: state), storagePolicy: .noStorage, options: .init(expiration: 1_700_003_600))
    },
    .init(name: "bundle id with the liveactivity suffix", code: "MalformedApnsConfig", field: "bundleId", trap: .malformedTopic, status: 400) {
        _ = try RequestBuilder(bundleID: "com.example.app.push-type.liveactivity")
    },
    .init(name: "empty bundle id", code: "MissingTopic", field: "bundleId", trap: .missingTopic, status: 400) {
        _ = try RequestBuilder(bundleID: "")
    },
    .init(name: "start without attributes-type", code: "MissingEventField", field: "aps.attributes-type", trap: nil, status: 400) {
        _ = try fixedBuilder().liveActivity(.start, token: deviceToken, content: .init(contentState: state, alert: "x", attributes: [:]))
    },
    .init(name: "start without alert", code: "MissingEventField", field: "aps.alert", trap: nil, status: 400) {
        _ = try fixedBuilder().liveActivity(.start, token: deviceToken, content: .init(contentState: state, attributesType: "A", attributes: [:]))
    },
    .init(name: "update without content-state", code: "MissingEventField", field: "aps.content-state", trap: nil, status: 400) {
        _ = try fixedBuilder().liveActivity(.update, token: deviceToken, content: .init())
    },
    .init(name: "attributes on an update", code: "InvalidPayload", field: "aps.attributes", trap: nil, status: 400) {
        _ = try fixedBuilder().liveActivity(.update, token: deviceToken, content: .init(contentState: state, attributes: [:]))
    },
    .init(name: "content-state that is not an object", code: "InvalidPayload", field: "aps.content-state", trap: nil, status: 400) {
        _ = try fixedBuilder().liveActivity(.update, token: deviceToken, content: .init(contentState: [1, 2]))
    },
    .init(name: "payload without aps", code: "InvalidPayload", field: "payload.aps", trap: nil, status: 400) {
        _ = try fixedBuilder().alert(token: deviceToken, payload: ["custom": 1])
    },
    .init(name: "empty channel id", code: "MissingChannelId", field: "channelId", trap: .badChannel, status: 400) {
        _ = try fixedBuilder().deleteChannel(channelID: "")
    },
    .init(name: "URL-decoded channel id", code: "BadChannelId", field: "channelId", trap: .badChannel, status: 400) {
        _ = try fixedBuilder().broadcast(channelID: "dHJhaW4tY2hhbm5lbC0x%3D", content: .init(contentState: state))
    },
    .init(name: "raw send without a push type", code: "MissingPushType", field: "apns-push-type", trap: nil, status: 400) {
        _ = try fixedBuilder().raw(token: deviceToken, payload: ["aps": [:]], headers: [])
    },
    .init(name: "raw send with authorization", code: "ForbiddenHeader", field: "authorization", trap: nil, status: 400) {
        _ = try fixedBuilder().raw(token: deviceToken, payload: ["aps": [:]], headers: [HTTPHeader("apns-push-type", "alert"), HTTPHeader("authorization", "bearer x")])
    },
    .init(name: "raw send with a repeated header", code: "DuplicateHeaders", field: "apns-topic", trap: nil, status: 400) {
        _ = try fixedBuilder().raw(token: deviceToken, payload: ["aps": [:]], headers: [HTTPHeader("apns-push-type", "alert"), HTTPHeader("apns-topic", "a"), HTTPHeader("apns-topic", "b")])
    },
    .init(name: "raw send with a malformed apns-id", code: "BadMessageId", field: "apns-id", trap: nil, status: 400) {
        _ = try fixedBuilder().raw(token: deviceToken, payload: ["aps": [:]], headers: [HTTPHeader("apns-push-type", "alert"), HTTPHeader("apns-id", "123")])
    },
] + controlCharacterCases + topicCases + numericCases

private func raw(_ headers: [(String, String)]) throws {
    _ = try fixedBuilder().raw(token: deviceToken, payload: ["aps": [:]], headers: [HTTPHeader("apns-push-type", "alert")] + headers.map { HTTPHeader($0.0, $0.1) })
}

/// Bytes HTTP/2 forbids in a header (APNs resets the stream; the relay used to
/// retry that 4 times and report a transport failure): refused before I/O.
let controlCharacterCases: [PreflightCase] = [
    .init(name: "NUL in a raw apns-topic", code: "InvalidHeader", field: "apns-topic", trap: nil, status: 400) { try raw([("apns-topic", "com.example.app\u{0}")]) },
    .init(name: "CR LF in a raw apns-collapse-id", code: "InvalidHeader", field: "apns-collapse-id", trap: nil, status: 400) { try raw([("apns-collapse-id", "a\r\nx")]) },
    .init(name: "0x01 in a raw apns-collapse-id", code: "InvalidHeader", field: "apns-collapse-id", trap: nil, status: 400) { try raw([("apns-collapse-id", "a\u{1}b")]) },
    .init(name: "DEL in a raw apns-id", code: "InvalidHeader", field: "apns-id", trap: nil, status: 400) { try raw([("apns-id", "0f9e8d7c-6b5a-4c3d-8e1f-a0b1c2d3e4f\u{7f}")]) },
    .init(name: "0x7f in a pass-through apns-* header", code: "InvalidHeader", field: "apns-unique-hint", trap: nil, status: 400) { try raw([("apns-unique-hint", "x\u{7f}")]) },
    .init(name: "a non-ASCII raw header value", code: "InvalidHeader", field: "apns-collapse-id", trap: nil, status: 400) { try raw([("apns-collapse-id", "é")]) },
    .init(name: "CR LF in a raw header name", code: "InvalidHeader", field: "apns-x\\x0d\\x0ainjected", trap: nil, status: 400) { try raw([("apns-x\r\ninjected", "1")]) },
    .init(name: "a space in a raw header name", code: "InvalidHeader", field: "apns\\x20topic", trap: nil, status: 400) { try raw([("apns topic", "com.example.app")]) },
    .init(name: "a colon in a raw header name", code: "InvalidHeader", field: "apns-topic:", trap: nil, status: 400) { try raw([("apns-topic:", "com.example.app")]) },
    .init(name: "an empty raw header name", code: "InvalidHeader", field: "headers", trap: nil, status: 400) { try raw([("", "x")]) },
    .init(name: "CR LF in a typed collapse id", code: "BadCollapseId", field: "collapseId", trap: nil, status: 400) {
        _ = try fixedBuilder().alert(token: deviceToken, payload: ["aps": [:]], options: .init(collapseID: "a\r\nx"))
    },
    .init(name: "NUL in a typed collapse id", code: "BadCollapseId", field: "collapseId", trap: nil, status: 400) {
        _ = try fixedBuilder().alert(token: deviceToken, payload: ["aps": [:]], options: .init(collapseID: "a\u{0}"))
    },
]

/// A topic must be the app's own bundle id, bare or with a documented suffix:
/// apps sharing a team key must not reach each other's devices.
let topicCases: [PreflightCase] = [
    .init(name: "another app's topic", code: "TopicNotForApp", field: "apns-topic", trap: nil, status: 403) { try raw([("apns-topic", "com.example.other")]) },
    .init(name: "another app's Live Activity topic", code: "TopicNotForApp", field: "apns-topic", trap: nil, status: 403) {
        try raw([("apns-topic", "com.example.other.push-type.liveactivity")])
    },
    .init(name: "the app's bundle id with an undocumented suffix", code: "TopicNotForApp", field: "apns-topic", trap: nil, status: 403) {
        try raw([("apns-topic", "com.example.app.evil")])
    },
    .init(name: "a prefix of the app's bundle id", code: "TopicNotForApp", field: "apns-topic", trap: nil, status: 403) { try raw([("apns-topic", "com.example")]) },
    .init(name: "a topic that is not bundle-id shaped", code: "BadTopic", field: "apns-topic", trap: nil, status: 400) { try raw([("apns-topic", "com.example.app/x")]) },
]

/// Extreme numbers in every field the builder converts: each is a 400 naming
/// the field, never an arithmetic trap.
let numericCases: [PreflightCase] = [
    .init(name: "apns-priority beyond Int64", code: "BadPriority", field: "apns-priority", trap: nil, status: 400) { try raw([("apns-priority", "9223372036854775808")]) },
    .init(name: "apns-priority Int64.min", code: "BadPriority", field: "apns-priority", trap: nil, status: 400) { try raw([("apns-priority", "-9223372036854775808")]) },
    .init(name: "apns-priority -0", code: "BadPriority", field: "apns-priority", trap: nil, status: 400) { try raw([("apns-priority", "-0")]) },
    .init(name: "apns-expiration beyond Int64", code: "BadExpirationDate", field: "apns-expiration", trap: .badDate, status: 400) {
        try raw([("apns-expiration", "99999999999999999999")])
    },
    .init(name: "apns-expiration Int64.max", code: "BadExpirationDate", field: "apns-expiration", trap: .badDate, status: 400) {
        try raw([("apns-expiration", "9223372036854775807")])
    },
    .init(name: "apns-expiration 1e308", code: "BadExpirationDate", field: "apns-expiration", trap: .badDate, status: 400) { try raw([("apns-expiration", "1e308")]) },
    .init(name: "apns-expiration NaN", code: "BadExpirationDate", field: "apns-expiration", trap: .badDate, status: 400) { try raw([("apns-expiration", "NaN")]) },
    .init(name: "expiration Int64.min", code: "BadExpirationDate", field: "expiration", trap: .badDate, status: 400) {
        _ = try fixedBuilder().alert(token: deviceToken, payload: ["aps": [:]], options: .init(expiration: .min))
    },
    .init(name: "stale date Int64.max", code: "BadDate", field: "aps.stale-date", trap: .badDate, status: 400) {
        _ = try fixedBuilder().liveActivity(.update, token: deviceToken, content: .init(contentState: state, staleDate: .max))
    },
    .init(name: "timestamp Int64.min", code: "BadDate", field: "aps.timestamp", trap: .badDate, status: 400) {
        _ = try fixedBuilder().liveActivity(.update, token: deviceToken, content: .init(contentState: state, timestamp: .min))
    },
    // The campaign's case: a year-5138 timestamp (just under the millisecond
    // threshold) was accepted and then blocked every later update.
    .init(name: "a timestamp in the year 5138", code: "BadDate", field: "aps.timestamp", trap: .badDate, status: 400) {
        _ = try fixedBuilder().liveActivity(.update, token: deviceToken, content: .init(contentState: state, timestamp: Preflight.millisecondThreshold - 1))
    },
    .init(name: "a timestamp 3601 s past the relay's clock", code: "BadDate", field: "aps.timestamp", trap: .badDate, status: 400) {
        _ = try fixedBuilder().liveActivity(.update, token: deviceToken, content: .init(contentState: state, timestamp: 1_700_000_000 + 3601))
    },
    .init(name: "a relevance score that is negative", code: "InvalidPayload", field: "aps.relevance-score", trap: nil, status: 400) {
        _ = try fixedBuilder().liveActivity(.update, token: deviceToken, content: .init(contentState: state, relevanceScore: -1e308))
    },
]

@Suite("Preflight")
struct PreflightTests {
    @Test("each bad input fails before I/O, naming the field and the rule", arguments: preflightCases)
    func rejects(_ testCase: PreflightCase) {
        do {
            try testCase.attempt()
            Issue.record("\(testCase.name) was accepted")
        } catch let error as APNsError {
            #expect(error.stage == .preflight)
            #expect(error.code.rawValue == testCase.code)
            #expect(error.field == testCase.field)
            #expect(error.trapID == testCase.trap)
            #expect(error.status == testCase.status)
            #expect(error.message.hasPrefix(testCase.field), "message should name the field: \(error.message)")
            #expect((error.rule ?? "").count > 5, "message should state the rule: \(error.message)")
            #expect(!error.message.contains(String(repeating: "z", count: 64)), "no token in messages")
        } catch {
            Issue.record("unexpected error type \(type(of: error)): \(error)")
        }
    }

    @Test("boundaries are accepted: 4096-byte payload, 64-byte collapse id, expiration 0, 200-digit token")
    func boundaries() throws {
        let builder = try fixedBuilder()
        let overhead = JSONValue.object(JSONObject([("aps", ["alert": ""])])).encoded().count
        let exact: JSONValue = ["aps": ["alert": .string(String(repeating: "x", count: 4096 - overhead))]]
        #expect(try builder.alert(token: deviceToken, payload: exact).body.count == 4096)
        _ = try builder.alert(token: String(repeating: "0", count: 200), payload: ["aps": [:]],
                              options: .init(expiration: 0, collapseID: String(repeating: "c", count: 64)))
        _ = try builder.liveActivity(.update, token: deviceToken, content: .init(contentState: state, staleDate: Preflight.millisecondThreshold - 1))
        // A timestamp exactly the allowed lead past the builder's clock (1_700_000_000).
        _ = try builder.liveActivity(.update, token: deviceToken, content: .init(contentState: state, timestamp: 1_700_000_000 + Preflight.defaultTimestampLead))
        // The app's own topics: bare, and with each documented suffix.
        for topic in ["com.example.app", "com.example.app.voip", "com.example.app.complication", "com.example.app.pushkit.fileprovider",
                      "com.example.app.push-type.liveactivity", "com.example.app.push-type.widgets"] {
            let request = try builder.raw(token: deviceToken, payload: ["aps": [:]], headers: [HTTPHeader("apns-push-type", "alert"), HTTPHeader("apns-topic", topic)])
            #expect(request.topic == topic)
        }
        // Visible ASCII and inner spaces pass through untouched.
        let collapse = "order 42 ~!#$%&'*+-.^_`|"
        #expect(try builder.alert(token: deviceToken, payload: ["aps": [:]], options: .init(collapseID: collapse)).header("apns-collapse-id") == collapse)
    }

    @Test("the timestamp lead is the builder's, measured on its injected clock")
    func timestampLead() throws {
        let strict = try RequestBuilder(bundleID: "com.example.app", now: { 1_000 }, makeID: { fixedID }, maximumTimestampLead: 0)
        _ = try strict.liveActivity(.update, token: deviceToken, content: .init(contentState: state, timestamp: 1_000))
        #expect(throws: APNsError.self) { _ = try strict.liveActivity(.update, token: deviceToken, content: .init(contentState: state, timestamp: 1_001)) }
        // A clock near Int64.max must not overflow the comparison.
        let late = try RequestBuilder(bundleID: "com.example.app", now: { .max - 10 }, makeID: { fixedID })
        _ = try late.liveActivity(.update, token: deviceToken, content: .init(contentState: state, timestamp: 1_700_000_000))
    }

    @Test("the millisecond error suggests the seconds value")
    func millisecondHint() {
        do {
            _ = try fixedBuilder().liveActivity(.update, token: deviceToken, content: .init(contentState: state, timestamp: 1_700_000_000_123))
            Issue.record("accepted a millisecond timestamp")
        } catch {
            #expect((error as? APNsError)?.rule?.contains("did you mean 1700000000?") == true)
        }
    }

    @Test("a token prints as its fingerprint")
    func tokenFingerprint() throws {
        let token = try DeviceToken(deviceToken)
        #expect(token.description == "token:\(token.fingerprint)")
        #expect(!token.description.contains(deviceToken))
        // SHA-256("abab…ab" × 32) computed independently with Python's hashlib.
        #expect(token.fingerprint == "271a413bd339")
    }
}
