import RelayJSON
import RelayBasics

extension RequestBuilder {
    /// A channel create, list, read or delete, or a broadcast, as an APNs client
    /// wrote it (``RawChannelRequest``), to this app's bundle id.
    ///
    /// The headers and body go to APNs as written, in the caller's order;
    /// the relay adds only `apns-request-id` when the caller sent none (the
    /// send's id, which APNs echoes and the audit row keeps). Checked first,
    /// as APNs would check them, so a request APNs would refuse is refused
    /// here and never sent: header names and values, no repeated header,
    /// `apns-request-id` (and `apns-id`) a UUID, `apns-channel-id` the base64
    /// id APNs returned (required to read, delete and broadcast), `apns-topic` (if
    /// any) this app's; a broadcast's `apns-push-type` `liveactivity`,
    /// `apns-priority`, `apns-expiration`, no `apns-collapse-id`, and a
    /// payload with `aps` of at most 5120 bytes; a create's body
    /// `{"message-storage-policy": 0|1, "push-type": "LiveActivity"}`; no
    /// body on a list or delete.
    public func rawChannel(_ request: RawChannelRequest) throws(APNsError) -> APNsRequest {
        let kind = request.kind
        var seen = Set<String>()
        var requestID: APNsID?
        var channelID: String?
        var pushType: String?
        var priority: Priority?
        for header in request.headers {
            let name = header.name
            try Preflight.checkHeaderName(name)
            try Preflight.checkHeaderValue(header.value, field: name)
            guard seen.insert(name).inserted else { throw APNsError.preflight("DuplicateHeaders", field: name, rule: "must appear once") }
            guard name.hasPrefix("apns-") else {
                throw APNsError.preflight(.forbiddenHeader, field: name, rule: "is not an apns-* header; the relay sets the rest itself")
            }
            switch name {
            case "apns-request-id", "apns-id":
                guard let id = APNsID(header.value) else {
                    throw APNsError.preflight(.badMessageID, field: name, rule: "must be a UUID (8-4-4-4-12 hex digits)")
                }
                if name == "apns-request-id" { requestID = id }
            case "apns-channel-id":
                if let rule = ChannelID.brokenRule(header.value) {
                    throw APNsError.preflight(header.value.isEmpty ? .missingChannelID : .badChannelID, field: name, rule: rule)
                }
                channelID = header.value
            case "apns-topic":
                // The path names the app; a topic of another app must not ride along under this one.
                try Preflight.checkTopic(header.value, bundleID: bundleID)
            case "apns-push-type" where kind == .broadcast:
                guard header.value == PushType.liveactivity.rawValue else {
                    throw APNsError.preflight(.invalidPushType, field: name, rule: "must be liveactivity on a broadcast (got \(header.value))")
                }
                pushType = header.value
            case "apns-priority" where kind == .broadcast:
                guard let value = Int64(header.value) else {
                    throw APNsError.preflight(.badPriority, field: name, rule: "must be 1, 5 or 10 (got \(header.value))")
                }
                priority = try Preflight.parsePriority(value, field: name)
            case "apns-expiration" where kind == .broadcast:
                guard let value = Int64(header.value) else {
                    throw APNsError.preflight(.badExpirationDate, field: name, rule: "must be an integer of unix seconds")
                }
                try Preflight.checkExpiration(value, field: name)
            case "apns-collapse-id" where kind == .broadcast:
                throw APNsError.preflight(.notForBroadcast, field: name, rule: "is for device sends only: a broadcast request has no apns-collapse-id")
            default:
                continue
            }
        }
        if (kind == .read || kind == .delete || kind == .broadcast) && channelID == nil {
            let what = switch kind {
            case .read: "read a channel"
            case .delete: "delete a channel"
            default: "broadcast"
            }
            throw APNsError.preflight(.missingChannelID, field: "apns-channel-id", rule: "is required to \(what)")
        }
        let apnsID = resolveID(requestID)
        let payload = try Self.checkRawChannelBody(request, apnsID: apnsID)
        if kind == .broadcast, pushType == nil {
            throw APNsError.preflight("MissingPushType", field: "apns-push-type", rule: "is required on a broadcast (liveactivity)", apnsID: apnsID)
        }

        var headers = request.headers
        if requestID == nil { headers.append(HTTPHeader("apns-request-id", apnsID.value)) }
        return APNsRequest(
            operation: kind.operation, method: kind.method, destination: kind == .broadcast ? .send : .channelManagement,
            path: kind.path(bundleID: bundleID), headers: headers, body: request.body, payload: payload, apnsID: apnsID,
            pushType: kind == .broadcast ? .liveactivity : nil, priority: priority, topic: nil, tokenFingerprint: nil,
            channelID: channelID)
    }

    /// The body as a value, checked for its kind; nil for list, read and delete, which carry none.
    private static func checkRawChannelBody(_ request: RawChannelRequest, apnsID: APNsID) throws(APNsError) -> JSONValue? {
        switch request.kind {
        case .list, .read, .delete:
            guard request.body.isEmpty else {
                throw APNsError.preflight(.invalidPayload, field: "body", rule: "must be empty: APNs' \(request.kind.method.rawValue) takes none", apnsID: apnsID)
            }
            return nil
        case .broadcast:
            try Preflight.checkPayloadSize(request.body.count, limit: PayloadLimit.extended, apnsID: apnsID)
            let payload = try parse(request.body, apnsID: apnsID)
            try Preflight.checkPayloadShape(payload)
            return payload
        case .create:
            guard !request.body.isEmpty else {
                throw APNsError.preflight(.payloadEmpty, field: "body", rule: #"must be {"message-storage-policy": 0 or 1, "push-type": "LiveActivity"}"#, apnsID: apnsID)
            }
            let body = try parse(request.body, apnsID: apnsID)
            guard let object = body.objectValue else {
                throw APNsError.preflight(.invalidPayload, field: "body", rule: "must be a JSON object (got \(body.typeName))", apnsID: apnsID)
            }
            guard let policy = object["message-storage-policy"]?.integerValue, policy == 0 || policy == 1 else {
                throw APNsError.preflight(
                    .invalidPayload, field: "message-storage-policy", rule: "must be 0 (no storage) or 1 (most recent message)", apnsID: apnsID)
            }
            guard object["push-type"]?.stringValue == "LiveActivity" else {
                throw APNsError.preflight(.invalidPushType, field: "push-type", rule: "must be \"LiveActivity\", the one type channels carry", apnsID: apnsID)
            }
            return body
        }
    }

    private static func parse(_ bytes: [UInt8], apnsID: APNsID) throws(APNsError) -> JSONValue {
        do {
            return try JSONParser.parse(bytes)
        } catch {
            throw APNsError.preflight(.invalidPayload, field: "body", rule: "must be JSON: \(error)", apnsID: apnsID)
        }
    }
}
