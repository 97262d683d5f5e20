import APNs
import RelayJSON
import Testing

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
            #expect(!error.isRetryable)
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
