import APNs
import Foundation
import RelayBasics
import Testing

/// `RequestBuilder.rawChannel`: APNs' channel and broadcast requests as a
/// client wrote them (the HTTP/2 APNs ingress), sent unchanged, or refused
/// before any I/O with APNs' reason, naming the field.
@Suite("Raw channel and broadcast requests")
struct RawChannelRequestTests {
    static let requestID = "7d0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"

    @Test("each kind goes to APNs' method, host and path for the app, the caller's headers in its order and its body byte for byte")
    func shapes() throws {
        let builder = try fixedBuilder()
        let createBody = Array(#"{ "message-storage-policy" : 1, "push-type": "LiveActivity", "x-future": true }"#.utf8)
        let create = try builder.rawChannel(.init(kind: .create, headers: [HTTPHeader("apns-request-id", Self.requestID)], body: createBody))
        #expect(create.method == .POST && create.path == "/1/apps/com.example.app/channels" && create.destination == .channelManagement)
        #expect(create.operation == .channelCreate)
        #expect(create.headers == [HTTPHeader("apns-request-id", Self.requestID)])
        #expect(create.apnsID.value == Self.requestID)
        #expect(create.body == createBody)

        // No request id of the caller's: the send's own is added last, and is the send's id.
        let list = try builder.rawChannel(.init(kind: .list, headers: [HTTPHeader("apns-custom", "x")], body: []))
        #expect(list.method == .GET && list.path == "/1/apps/com.example.app/all-channels" && list.operation == .channelList)
        #expect(list.headers == [HTTPHeader("apns-custom", "x"), HTTPHeader("apns-request-id", fixedID.value)])
        #expect(list.apnsID == fixedID && list.body.isEmpty)

        let delete = try builder.rawChannel(.init(kind: .delete, headers: [HTTPHeader("apns-channel-id", channel)], body: []))
        #expect(delete.method == .DELETE && delete.path == "/1/apps/com.example.app/channels" && delete.operation == .channelDelete)
        #expect(delete.channelID == channel)

        let read = try builder.rawChannel(.init(kind: .read, headers: [HTTPHeader("apns-channel-id", channel), HTTPHeader("apns-request-id", Self.requestID)], body: []))
        #expect(read.method == .GET && read.path == "/1/apps/com.example.app/channels" && read.destination == .channelManagement)
        #expect(read.operation == .channelRead && read.channelID == channel && read.apnsID.value == Self.requestID && read.body.isEmpty)

        let payload = Array(#"{"aps":{"event":"update","content-state":{"a":1},"timestamp":1700000000}}"#.utf8)
        let headers = [
            HTTPHeader("apns-push-type", "liveactivity"), HTTPHeader("apns-expiration", "0"), HTTPHeader("apns-channel-id", channel),
            HTTPHeader("apns-priority", "10"), HTTPHeader("apns-request-id", Self.requestID),
        ]
        let broadcast = try builder.rawChannel(.init(kind: .broadcast, headers: headers, body: payload))
        #expect(broadcast.method == .POST && broadcast.path == "/4/broadcasts/apps/com.example.app" && broadcast.destination == .send)
        #expect(broadcast.operation == .broadcast && broadcast.pushType == .liveactivity && broadcast.priority == .immediate)
        #expect(broadcast.headers == headers && broadcast.body == payload && broadcast.channelID == channel)
    }

    @Test("refusals before any I/O: APNs' reason, the field, the status", arguments: [
        (RawChannelRequest.Kind.delete, [String](), "", "MissingChannelId", "apns-channel-id", 400),
        (.read, [String](), "", "MissingChannelId", "apns-channel-id", 400),
        (.read, ["apns-channel-id: \(channel)"], #"{"a":1}"#, "InvalidPayload", "body", 400),
        (.broadcast, ["apns-push-type: liveactivity"], #"{"aps":{}}"#, "MissingChannelId", "apns-channel-id", 400),
        (.delete, ["apns-channel-id: abc*"], "", "BadChannelId", "apns-channel-id", 400),
        (.delete, ["apns-channel-id: \(channel)", "apns-channel-id: \(channel)"], "", "DuplicateHeaders", "apns-channel-id", 400),
        (.list, ["apns-request-id: 42"], "", "BadMessageId", "apns-request-id", 400),
        (.list, [], #"{"a":1}"#, "InvalidPayload", "body", 400),
        (.list, ["content-type: application/json"], "", "ForbiddenHeader", "content-type", 400),
        (.create, [], "", "PayloadEmpty", "body", 400),
        (.create, [], "[1]", "InvalidPayload", "body", 400),
        (.create, [], #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#, "InvalidPayload", "message-storage-policy", 400),
        (.create, [], #"{"message-storage-policy":0,"push-type":"alert"}"#, "InvalidPushType", "push-type", 400),
        (.create, ["apns-topic: com.example.other"], #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#, "TopicNotForApp", "apns-topic", 403),
        (.broadcast, ["apns-channel-id: \(channel)"], #"{"aps":{}}"#, "MissingPushType", "apns-push-type", 400),
        (.broadcast, ["apns-channel-id: \(channel)", "apns-push-type: alert"], #"{"aps":{}}"#, "InvalidPushType", "apns-push-type", 400),
        (.broadcast, ["apns-channel-id: \(channel)", "apns-push-type: liveactivity", "apns-priority: 7"], #"{"aps":{}}"#, "BadPriority", "apns-priority", 400),
        (.broadcast, ["apns-channel-id: \(channel)", "apns-push-type: liveactivity", "apns-expiration: soon"], #"{"aps":{}}"#, "BadExpirationDate", "apns-expiration", 400),
        (.broadcast, ["apns-channel-id: \(channel)", "apns-push-type: liveactivity", "apns-collapse-id: c"], #"{"aps":{}}"#, "NotForBroadcast", "apns-collapse-id", 400),
        (.broadcast, ["apns-channel-id: \(channel)", "apns-push-type: liveactivity"], #"{"alert":"x"}"#, "InvalidPayload", "payload.aps", 400),
        (.broadcast, ["apns-channel-id: \(channel)", "apns-push-type: liveactivity"], "", "PayloadEmpty", "payload", 400),
        (.broadcast, ["apns-channel-id: \(channel)", "apns-push-type: liveactivity"], #"{"aps":{"x":""# + String(repeating: "y", count: 5120) + #""}}"#, "PayloadTooLarge", "payload", 413),
    ])
    func refusals(kind: RawChannelRequest.Kind, headers: [String], body: String, code: String, field: String, status: Int) throws {
        let parsed = headers.map { line in
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            return HTTPHeader(parts[0], parts[1])
        }
        do {
            let request = try fixedBuilder().rawChannel(.init(kind: kind, headers: parsed, body: Array(body.utf8)))
            Issue.record("accepted: \(request.method) \(request.path) \(request.headers)")
        } catch let error as APNsError {
            #expect(error.stage == .preflight)
            #expect(error.code.rawValue == code, "\(error)")
            #expect(error.field == field, "\(error)")
            #expect(error.status == status, "\(error)")
            #expect((error.rule ?? "").count > 5, "the rule: \(error)")
        }
    }
}
