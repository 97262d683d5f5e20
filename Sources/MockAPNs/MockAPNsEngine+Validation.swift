import APNs
import RelayBasics
import RelayJSON

/// The mock's own rule tables. They restate Apple's documentation rather than
/// reuse the relay's request builder, so a builder bug shows up as a rejection.
enum MockRules {
    static let topicSuffixes: [String: String] = [
        "alert": "", "background": "", "mdm": "", "location": ".location-query", "voip": ".voip",
        "complication": ".complication", "fileprovider": ".pushkit.fileprovider",
        "liveactivity": ".push-type.liveactivity", "pushtotalk": ".voip-ptt", "widgets": ".push-type.widgets",
    ]

    static func isHexToken(_ token: Substring) -> Bool {
        (64...200).contains(token.utf8.count) && token.utf8.count % 2 == 0 && token.allUTF8Bytes(satisfy: Hex.isDigit)
    }

    /// Hex groups of 8, 4, 4, 4 and 12 digits joined by dashes, either case.
    /// Read as bytes: a dash or a digit is one ASCII byte, so any other byte
    /// (a non-ASCII character, a combining mark) fails it exactly as the
    /// split into characters did, without the split's arrays.
    static func isUUID(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard bytes.count == 36 else { return false }
            for (index, byte) in bytes.enumerated() {
                let isDash = index == 8 || index == 13 || index == 18 || index == 23
                guard isDash ? byte == UInt8(ascii: "-") : Hex.isDigit(byte) else { return false }
            }
            return true
        }
    }

    /// Whether two headers share a name (APNs answers DuplicateHeaders).
    /// A request carries a handful: comparing each pair costs less than
    /// hashing every name into a set, which a long list still gets.
    static func hasDuplicateNames(_ headers: [HTTPHeader]) -> Bool {
        guard headers.count <= 16 else {
            var names = Set<String>()
            return headers.contains { !names.insert($0.name).inserted }
        }
        for later in headers.indices.dropFirst() {
            for earlier in 0..<later where headers[earlier].name == headers[later].name { return true }
        }
        return false
    }

    /// The path's segments after its first `/` (empty ones kept), as
    /// `path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()`
    /// gives them. An ASCII path is split on its bytes; any other takes the
    /// split by characters, where a `/` followed by a combining mark is no
    /// separator.
    static func pathSegments(_ path: String) -> [Substring] {
        let utf8 = path.utf8
        guard path.allUTF8Bytes(satisfy: { $0 < 0x80 }) else {
            return Array(path.split(separator: "/", omittingEmptySubsequences: false).dropFirst())
        }
        var segments: [Substring] = []
        segments.reserveCapacity(4)
        var start: String.Index?
        var index = utf8.startIndex
        while index != utf8.endIndex {
            if utf8[index] == UInt8(ascii: "/") {
                if let start { segments.append(path[start..<index]) }
                start = utf8.index(after: index)
            }
            index = utf8.index(after: index)
        }
        if let start { segments.append(path[start..<utf8.endIndex]) }
        return segments
    }

    static func isBase64(_ text: String) -> Bool {
        !text.isEmpty && text.count % 4 == 0 && text.count <= 256
            && text.drop(while: { $0 != "=" }).allSatisfy { $0 == "=" }
            && text.prefix(while: { $0 != "=" }).allSatisfy { $0.isLetter && $0.isASCII || $0.isNumber && $0.isASCII || $0 == "+" || $0 == "/" }
    }
}

extension MockAPNsEngine {
    /// APNs' answer to a request, before any scripted rule.
    func validate(_ request: MockRequest) -> MockResponse {
        if MockRules.hasDuplicateNames(request.headers) { return error("DuplicateHeaders", request: request) }
        let route = MockRules.pathSegments(request.path)

        switch route.first {
        case "3" where route.count == 3 && route[1] == "device":
            guard request.method == "POST" else { return error("MethodNotAllowed", request: request) }
            if let rejection = verifier.rejection(authorization: request.header("authorization")) {
                return error(rejection, request: request)
            }
            return validateDeviceSend(request, token: route[2])
        case "3" where route.count == 2 && route[1] == "device":
            return error("MissingDeviceToken", request: request)
        case "4" where route.count == 4 && route[1] == "broadcasts" && route[2] == "apps":
            guard request.method == "POST" else { return error("MethodNotAllowed", request: request) }
            if let rejection = verifier.rejection(authorization: request.header("authorization")) {
                return error(rejection, request: request)
            }
            return validateBroadcast(request, bundleID: String(route[3]))
        case "1" where route.count == 4 && route[1] == "apps":
            if let rejection = verifier.rejection(authorization: request.header("authorization")) {
                return error(rejection, request: request)
            }
            return manageChannels(request, bundleID: String(route[2]), resource: String(route[3]))
        default:
            return error("BadPath", request: request)
        }
    }

    private func validateDeviceSend(_ request: MockRequest, token: Substring) -> MockResponse {
        guard let pushType = request.header("apns-push-type") else { return error("MissingPushType", request: request) }
        guard let suffix = MockRules.topicSuffixes[pushType] else { return error("InvalidPushType", request: request) }
        guard let topic = request.header("apns-topic"), !topic.isEmpty else { return error("MissingTopic", request: request) }
        guard topic.hasSuffix(suffix) else { return error("TopicDisallowed", request: request) }
        let bundleID = String(topic.dropLast(suffix.count))
        // A topic carrying another push type's suffix (an alert to
        // `<bundle>.push-type.widgets`, a widgets push to
        // `<bundle>.push-type.liveactivity.push-type.widgets`) names no app
        // the key may push to as this type.
        if MockRules.topicSuffixes.values.contains(where: { !$0.isEmpty && bundleID.hasSuffix($0) }) {
            return error("TopicDisallowed", request: request)
        }
        if !configuration.bundleIDs.isEmpty, !configuration.bundleIDs.contains(bundleID) {
            return error("TopicDisallowed", request: request)
        }
        if let response = validateCommonHeaders(request) { return response }
        guard MockRules.isHexToken(token) else { return error("BadDeviceToken", request: request) }
        if request.body.isEmpty { return error("PayloadEmpty", request: request) }
        let limit = pushType == "voip" ? 5120 : 4096
        if request.body.count > limit { return error("PayloadTooLarge", request: request) }
        return success(request)
    }

    private func validateBroadcast(_ request: MockRequest, bundleID: String) -> MockResponse {
        guard configuration.broadcastEnabled else { return error("FeatureNotEnabled", request: request) }
        if !configuration.bundleIDs.isEmpty, !configuration.bundleIDs.contains(bundleID) {
            return error("TopicDisallowed", request: request)
        }
        guard let pushType = request.header("apns-push-type") else { return error("MissingPushType", request: request) }
        guard pushType == "liveactivity" else { return error("InvalidPushType", request: request) }
        guard let channel = request.header("apns-channel-id") else { return error("MissingChannelId", request: request) }
        guard MockRules.isBase64(channel) else { return error("BadChannelId", request: request) }
        guard let policy = state.withLock({ $0.channels[bundleID]?[channel] }) else {
            return error("ChannelNotRegistered", request: request)
        }
        if let response = validateCommonHeaders(request) { return response }
        if policy == 0, request.header("apns-expiration") != "0" { return error("BadExpirationDate", request: request) }
        if request.body.isEmpty { return error("PayloadEmpty", request: request) }
        if request.body.count > 5120 { return error("PayloadTooLarge", request: request) }
        return success(request, idHeader: "apns-request-id")
    }

    private func validateCommonHeaders(_ request: MockRequest) -> MockResponse? {
        if let priority = request.header("apns-priority"), !["1", "5", "10"].contains(priority) {
            return error("BadPriority", request: request)
        }
        if let expiration = request.header("apns-expiration"), Int64(expiration).map({ $0 < 0 }) ?? true {
            return error("BadExpirationDate", request: request)
        }
        if let collapseID = request.header("apns-collapse-id"), collapseID.utf8.count > 64 {
            return error("BadCollapseId", request: request)
        }
        if let id = request.header("apns-id"), !MockRules.isUUID(id) {
            return error("BadMessageId", request: request)
        }
        return nil
    }

    /// 200 with the request's id echoed (or a fresh one) and an `apns-unique-id`.
    func success(_ request: MockRequest, idHeader: String = "apns-id", status: Int = 200, body: [UInt8] = [])
        -> MockResponse
    {
        let id = request.header(idHeader)?.lowercasedHeaderName ?? APNsID.random().value
        return MockResponse(
            status: status, headers: [HTTPHeader(idHeader, id), HTTPHeader("apns-unique-id", APNsID.random().value)],
            body: body)
    }
}
